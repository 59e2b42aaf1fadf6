"""A minimal npm registry on 127.0.0.1, started by a test: packuments and tarballs.

:class:`NpmRegistry` serves what ``npm install NAME@VERSION`` fetches: the
package document (``GET /NAME``, scoped names URL-encoded) listing each version's
``dist.tarball`` and ``dist.integrity`` (the tarball's real SHA-512, unless a test
asks for a wrong one), and the tarball itself. It counts the requests of each
kind, and can hold tarball responses until a test releases them, so a test knows
an install is under way. :func:`standin_host_package` packs a stand-in host CLI
(``tests/stubcli.py``) as the package's executable. :func:`npm_env` points npm at
the registry with a private npm cache and no user configuration.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import shutil
import tarfile
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from stubcli import write_stub

__all__ = [
    "NpmRegistry",
    "Published",
    "npm_env",
    "require_npm",
    "serve_registry",
    "standin_host_package",
    "tarball",
]

#: Seconds a held tarball response waits for its release: a hang guard, not a bound.
HOLD_GUARD_S = 300.0


def require_npm() -> str:
    """Return npm's path; the managed-install tests need the real npm client."""
    found = shutil.which("npm")
    assert found is not None, "npm (Node.js) is required by the managed host tests"
    return found


def tarball(name: str, version: str, files: Mapping[str, tuple[bytes, int]]) -> bytes:
    """Pack ``files`` (path -> (content, mode)) under ``package/`` with a package.json."""
    base = name.rsplit("/", 1)[-1]
    bins = {Path(p).name: p for p in files if p.startswith("bin/")}
    manifest = {"name": name, "version": version, "bin": bins, "description": f"stand-in {base}"}
    entries = {"package.json": (json.dumps(manifest, indent=2).encode(), 0o644), **files}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for path, (content, mode) in sorted(entries.items()):
            info = tarfile.TarInfo(f"package/{path}")
            info.size, info.mode, info.mtime = len(content), mode, 499162500
            archive.addfile(info, io.BytesIO(content))
    return gzip.compress(raw.getvalue(), mtime=0)


def standin_host_package(
    source: Path, command: str, version: str, **spec: Any
) -> tuple[dict[str, tuple[bytes, int]], Path]:
    """A package's files whose ``bin/<command>`` is a stand-in host CLI (``stubcli``).

    The stand-in reads its spec from, and records its calls next to, the program
    written into ``source``: ``stubcli.calls(<returned path>)`` lists what every
    installed copy of the package was started for.
    """
    program = write_stub(source, command, version=version, **spec)
    return {f"bin/{command}": (program.read_bytes(), 0o755)}, program


@dataclass
class Published:
    """One published version: its tarball and the integrity the registry announces."""

    data: bytes
    integrity: str
    shasum: str


@dataclass
class NpmRegistry:
    """The registry's content, what it was asked for, and the tarball gate."""

    url: str = ""
    packages: dict[str, dict[str, Published]] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    """Requests by kind and name: ``("packument", name)`` / ``("tarball", name)`` as text."""
    gate: threading.Event | None = None
    """When set to an Event, tarball responses wait until it is set."""
    tarball_requested: threading.Event = field(default_factory=threading.Event)
    """Set when a tarball is first requested."""
    _lock: threading.Condition = field(default_factory=threading.Condition)

    def publish(
        self,
        name: str,
        version: str,
        files: Mapping[str, tuple[bytes, int]],
        *,
        integrity: str | None = None,
    ) -> Published:
        """Publish ``name@version``; ``integrity`` overrides the real one (a corrupt registry)."""
        data = tarball(name, version, files)
        real = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
        published = Published(data, integrity or real, hashlib.sha1(data).hexdigest())  # noqa: S324 - npm's legacy shasum field
        self.packages.setdefault(name, {})[version] = published
        return published

    def count(self, kind: str, name: str) -> int:
        """How many ``packument`` or ``tarball`` requests ``name`` got."""
        with self._lock:
            return self.requests[f"{kind} {name}"]

    def _note(self, kind: str, name: str) -> None:
        with self._lock:
            self.requests[f"{kind} {name}"] += 1
            self._lock.notify_all()

    def wait_for(self, kind: str, name: str, count: int) -> bool:
        """Block until ``name`` got ``count`` requests of ``kind`` (a hang guard bounds it)."""
        with self._lock:
            return self._lock.wait_for(
                lambda: self.requests[f"{kind} {name}"] >= count, HOLD_GUARD_S
            )

    def packument(self, name: str) -> dict[str, Any] | None:
        """The package document npm reads, or ``None`` for an unknown package."""
        versions = self.packages.get(name)
        if versions is None:
            return None
        base = name.rsplit("/", 1)[-1]
        documents = {
            version: {
                "name": name,
                "version": version,
                "bin": {},
                "dist": {
                    "tarball": f"{self.url}{name}/-/{base}-{version}.tgz",
                    "integrity": published.integrity,
                    "shasum": published.shasum,
                },
            }
            for version, published in versions.items()
        }
        for version, document in documents.items():
            document["bin"] = _bins(versions[version].data)
        latest = sorted(versions, key=lambda v: tuple(int(p) for p in v.split(".")))[-1]
        return {"name": name, "dist-tags": {"latest": latest}, "versions": documents}

    def tarball_of(self, name: str, filename: str) -> bytes | None:
        """The tarball ``name/-/filename`` names, or ``None``."""
        base = name.rsplit("/", 1)[-1]
        for version, published in self.packages.get(name, {}).items():
            if filename == f"{base}-{version}.tgz":
                return published.data
        return None


def _bins(data: bytes) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as archive:
        member = archive.extractfile("package/package.json")
        assert member is not None
        bins: dict[str, str] = json.loads(member.read())["bin"]
    return bins


def _handler(registry: NpmRegistry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Keep the test output quiet."""

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = unquote(self.path.split("?", 1)[0]).lstrip("/")
            if "/-/" in path:
                name, filename = path.split("/-/", 1)
                registry._note("tarball", name)
                registry.tarball_requested.set()
                if registry.gate is not None:
                    registry.gate.wait(HOLD_GUARD_S)
                data = registry.tarball_of(name, filename)
                if data is None:
                    self._send(404, b'{"error":"not found"}', "application/json")
                else:
                    self._send(200, data, "application/octet-stream")
                return
            registry._note("packument", path)
            document = registry.packument(path)
            if document is None:
                self._send(404, b'{"error":"not found"}', "application/json")
            else:
                self._send(200, json.dumps(document).encode(), "application/json")

    return Handler


@contextmanager
def serve_registry(registry: NpmRegistry | None = None) -> Iterator[NpmRegistry]:
    """Serve ``registry`` on 127.0.0.1 (an ephemeral port) for the block, then stop it."""
    registry = registry or NpmRegistry()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(registry))
    server.daemon_threads = True
    registry.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, name="npm-registry", daemon=True)
    thread.start()
    try:
        yield registry
    finally:
        if registry.gate is not None:
            registry.gate.set()
        server.shutdown()
        server.server_close()
        thread.join()


def npm_env(tmp: Path, registry_url: str) -> dict[str, str]:
    """npm's variables for a test: this registry, a private cache, no user config, no retry."""
    userconfig = tmp / "npmrc"
    userconfig.touch()
    return {
        "npm_config_registry": registry_url,
        "npm_config_cache": str(tmp / "npm-cache"),
        "npm_config_userconfig": str(userconfig),
        "npm_config_update_notifier": "false",
        "npm_config_fetch_retries": "0",
        "npm_config_audit": "false",
        "npm_config_fund": "false",
    }
