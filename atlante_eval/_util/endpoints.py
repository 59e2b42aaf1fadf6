"""Network destinations: ``host:port`` parsing and the provider URLs found in an env.

An allow-list entry is ``host:port``, a bare ``host`` (port 443) or a URL
(``https://host[:port]/...``, the scheme's default port). Host names compare
case-insensitively; IPv6 literals are written in brackets (``[::1]:8080``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "Endpoint",
    "EndpointError",
    "endpoints_in_env",
    "parse_endpoint",
]


class EndpointError(ValueError):
    """Raised by :func:`parse_endpoint` for text that names no ``host:port``."""


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    """One network destination a sandbox may reach."""

    host: str
    """Lower-case host name or IP address (IPv6 without brackets)."""
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def loopback(self) -> bool:
        """Whether this is a loopback address a sandbox must reach through a forwarded port."""
        return self.host in ("127.0.0.1", "localhost", "::1") or self.host.startswith("127.")


_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def parse_endpoint(text: str) -> Endpoint:
    """Parse ``host:port``, ``host`` (port 443) or an ``http(s)://`` URL.

    Raises:
        EndpointError: the text names no host, or its port is not 1-65535.
    """
    raw = text.strip()
    if "://" in raw:
        try:
            parts = urlsplit(raw)
            port = parts.port
        except ValueError as exc:
            raise EndpointError(f"not a valid URL: {text!r}") from exc
        scheme = parts.scheme.lower()
        if not parts.hostname or scheme not in _DEFAULT_PORTS:
            raise EndpointError(f"not an http(s) URL with a host: {text!r}")
        return Endpoint(parts.hostname.lower(), port or _DEFAULT_PORTS[scheme])
    host, port_text = raw, ""
    if raw.startswith("["):
        close = raw.find("]")
        if close < 0:
            raise EndpointError(f"unclosed IPv6 bracket: {text!r}")
        host, rest = raw[1:close], raw[close + 1 :]
        if rest and not rest.startswith(":"):
            raise EndpointError(f"expected host:port, got {text!r}")
        port_text = rest[1:]
    elif raw.count(":") == 1:
        host, port_text = raw.split(":")
    if not host or any(c in host for c in "/ @?#") or (":" in host and not raw.startswith("[")):
        raise EndpointError(f"expected host:port, got {text!r}")
    if not port_text:
        return Endpoint(host.lower(), 443)
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise EndpointError(f"port must be 1-65535 in {text!r}")
    return Endpoint(host.lower(), int(port_text))


def _urls_in(value: Any, env: Mapping[str, str]) -> Iterable[str]:
    """``baseURL`` values of an OpenCode config's providers (``{env:NAME}`` resolved)."""
    if not isinstance(value, dict):
        return
    providers = value.get("provider")
    if not isinstance(providers, dict):
        return
    for provider in providers.values():
        options = provider.get("options") if isinstance(provider, dict) else None
        url = options.get("baseURL") if isinstance(options, dict) else None
        if isinstance(url, str):
            if url.startswith("{env:") and url.endswith("}"):
                url = env.get(url[5:-1], "")
            yield url


def endpoints_in_env(env: Mapping[str, str]) -> list[Endpoint]:
    """Provider endpoints a session's environment configures.

    Every ``*_BASE_URL`` variable (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, ...)
    and each provider ``baseURL`` of ``OPENCODE_CONFIG_CONTENT``. Values that name
    no http(s) host are ignored.
    """
    urls = [value for name, value in env.items() if name.upper().endswith("_BASE_URL")]
    content = env.get("OPENCODE_CONFIG_CONTENT")
    if content:
        with contextlib.suppress(ValueError):
            urls.extend(_urls_in(json.loads(content), env))
    found: list[Endpoint] = []
    for url in urls:
        if "://" not in url:
            continue
        try:
            endpoint = parse_endpoint(url)
        except EndpointError:
            continue
        if endpoint not in found:
            found.append(endpoint)
    return found
