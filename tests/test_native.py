"""Reading and verifying the native outputs (ownership manifest and files) of a build."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from factory import tree_listing, write_native

from atlante_eval.choices import HostName
from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.project.native import (
    NATIVE_HOSTS,
    NativeOutputsError,
    read_native_outputs,
    verify_native_outputs,
)

MANIFEST = ".atlante/opencode-native.json"
AGENT = ".opencode/agents/reviewer.md"


def _built(tmp_path: Path, host: HostName = "opencode") -> Path:
    root = tmp_path / "p"
    root.mkdir(parents=True)
    write_native(root, host, agents={"reviewer": "Review."}, skills={"style": "Be brief."})
    return root


def _manifest(root: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    return value


def _rewrite(root: Path, change: Callable[[dict[str, Any]], None]) -> None:
    value = _manifest(root)
    change(value)
    (root / MANIFEST).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _failure(root: Path, host: str = "opencode") -> str:
    before = tree_listing(root)
    with pytest.raises(NativeOutputsError) as caught:
        read_native_outputs(root, host)
    assert tree_listing(root) == before
    message = str(caught.value)
    assert message.startswith("native output verification failed: ")
    return message.removeprefix("native output verification failed: ")


# --- success ------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["opencode", "claude-code"])
def test_verified_outputs_return_bytes_and_manifest_digest(tmp_path: Path, host: HostName) -> None:
    """A consistent build yields every file's bytes, sorted by path, and the manifest digest."""
    root = _built(tmp_path, host)
    outputs = read_native_outputs(root, host)
    manifest_bytes = (root / NATIVE_HOSTS[host].path).read_bytes()
    assert outputs.host == host
    assert outputs.manifest_path == NATIVE_HOSTS[host].path
    assert outputs.digest == hashlib.sha256(manifest_bytes).hexdigest()
    assert outputs.agent_ids == ("reviewer",)
    assert [f.path for f in outputs.files] == sorted(outputs.paths)
    for native in outputs.files:
        assert native.content == (root / native.path).read_bytes()
        assert native.sha256 == hashlib.sha256(native.content).hexdigest()
    assert {(f.kind, f.id) for f in outputs.files} == {("agent", "reviewer"), ("skill", "style")}


def test_empty_file_list_is_a_valid_build(tmp_path: Path) -> None:
    """A manifest that owns no files verifies (a project with no agents or skills)."""
    root = tmp_path / "p"
    root.mkdir()
    write_native(root, agents={}, skills={})
    assert read_native_outputs(root, "opencode").files == ()


def test_verify_native_outputs_raises_a_diagnostic(tmp_path: Path) -> None:
    """verify_native_outputs turns a failure into native-outputs-not-verified (exit 2)."""
    root = tmp_path / "p"
    root.mkdir()
    with pytest.raises(DiagnosticError) as caught:
        verify_native_outputs(root, "claude-code")
    assert caught.value.exit_code == 2
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "native-outputs-not-verified"
    assert diagnostic.message == (
        "native output verification failed: Claude Code ownership manifest is missing "
        "(.atlante/claude-code-native.json)"
    )
    assert diagnostic.expected == "verified native Claude Code outputs"
    assert diagnostic.next == (
        "run `atlante build` (Atlante (https://atlante.sh), the harness builder) and try again"
    )


# --- the manifest -------------------------------------------------------------------


@pytest.mark.parametrize("host", ["opencode", "claude-code"])
def test_missing_manifest(tmp_path: Path, host: HostName) -> None:
    """No manifest means no build for that host."""
    root = tmp_path / "p"
    root.mkdir()
    label = NATIVE_HOSTS[host].label
    assert _failure(root, host) == (
        f"{label} ownership manifest is missing ({NATIVE_HOSTS[host].path})"
    )


def test_manifest_of_the_other_host_does_not_count(tmp_path: Path) -> None:
    """An OpenCode build does not verify Claude Code outputs."""
    root = _built(tmp_path, "opencode")
    assert "Claude Code ownership manifest is missing" in _failure(root, "claude-code")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{not json", "is malformed JSON (Expecting property name enclosed in double quotes"),
        (b"", "is malformed JSON (the document is empty at line 1, column 1)"),
        (b'{"format": 1, "format": 2}', 'duplicate key "format"'),
        (b"\xff\xfe", "is not valid UTF-8"),
        (b"[]", "must have exactly the keys format, version and files"),
    ],
)
def test_malformed_manifest(tmp_path: Path, content: bytes, fragment: str) -> None:
    """A manifest that is not a UTF-8 JSON object fails with what is wrong."""
    root = _built(tmp_path)
    (root / MANIFEST).write_bytes(content)
    assert fragment in _failure(root)


def test_oversized_manifest(tmp_path: Path) -> None:
    """A manifest over 1 MiB is refused."""
    root = _built(tmp_path)
    with (root / MANIFEST).open("ab") as handle:
        handle.write(b" " * (1024 * 1024))
    assert "larger than the 1048576-byte limit" in _failure(root)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda m: m.update(extra=1), "exactly the keys format, version and files"),
        (lambda m: m.pop("files"), "exactly the keys format, version and files"),
        (lambda m: m.update(format="atlante-claude-code-native"), "unsupported manifest format"),
        (lambda m: m.update(version=2), "unsupported manifest version 2"),
        (lambda m: m.update(version=1.0), "unsupported manifest version 1.0"),
        (lambda m: m.update(version=True), "unsupported manifest version True"),
        (lambda m: m.update(files={}), "manifest files must be an array"),
    ],
)
def test_manifest_shape(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], fragment: str
) -> None:
    """The manifest has exactly format, version 1 (an integer) and a files array."""
    root = _built(tmp_path)
    _rewrite(root, change)
    assert fragment in _failure(root)


def _entry(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        manifest["files"][0].update(fields)
        for key in [k for k, v in fields.items() if v is None]:
            del manifest["files"][0][key]

    return change


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (_entry(extra="x"), "exactly the keys kind, id, path and sha256"),
        (_entry(sha256=None), "exactly the keys kind, id, path and sha256"),
        (_entry(id=7), "has a non-string value"),
        (_entry(kind="command"), "unknown kind 'command'"),
        (_entry(id="Reviewer"), "invalid id 'Reviewer'"),
        (_entry(id="a" * 65, path=".opencode/agents/" + "a" * 65 + ".md"), "invalid id"),
        (_entry(path="../agents/reviewer.md"), "unsafe path"),
        (_entry(path="/abs/reviewer.md"), "unsafe path"),
        (_entry(path=".opencode\\agents\\reviewer.md"), "unsafe path"),
        (_entry(path="C:/agents/reviewer.md"), "unsafe path"),
        (_entry(path=".opencode//reviewer.md"), "unsafe path"),
        (_entry(path="reviewer.md"), "agent path must end with reviewer.md"),
        (_entry(path=".opencode/agents/other.md"), "agent path must end with reviewer.md"),
        (_entry(sha256="A" * 64), "not 64 lowercase hex characters"),
        (_entry(sha256="ab"), "not 64 lowercase hex characters"),
    ],
)
def test_manifest_entry_rules(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], fragment: str
) -> None:
    """Each entry has exactly kind, id, path and sha256, with a safe path of the right shape."""
    root = _built(tmp_path)
    _rewrite(root, change)
    assert fragment in _failure(root)


def test_skill_path_shape(tmp_path: Path) -> None:
    """A skill lives at <dir>/<id>/SKILL.md."""
    root = _built(tmp_path)

    def change(manifest: dict[str, Any]) -> None:
        skill = next(e for e in manifest["files"] if e["kind"] == "skill")
        skill["path"] = ".opencode/skills/style.md"

    _rewrite(root, change)
    assert "skill path must end with style/SKILL.md" in _failure(root)


def test_duplicate_ids(tmp_path: Path) -> None:
    """Two entries may not share (kind, id)."""
    root = _built(tmp_path)
    _rewrite(root, lambda m: m["files"].append(dict(m["files"][0])))
    assert _failure(root) == "duplicate agent id 'reviewer'"


# --- the owned files -----------------------------------------------------------------


def test_drifted_file(tmp_path: Path) -> None:
    """A file whose bytes no longer match its recorded SHA-256 has drifted."""
    root = _built(tmp_path)
    (root / AGENT).write_text("edited by hand", encoding="utf-8")
    assert _failure(root) == f"owned OpenCode target drifted: {AGENT}"


def test_missing_file(tmp_path: Path) -> None:
    """A file listed in the manifest but absent is missing."""
    root = _built(tmp_path)
    (root / AGENT).unlink()
    assert _failure(root) == f"owned {AGENT} target is missing"


def test_symlinked_file(tmp_path: Path) -> None:
    """An owned file replaced by a symlink (even to identical bytes) is refused."""
    root = _built(tmp_path)
    shutil.copy(root / AGENT, root / "copy.md")
    (root / AGENT).unlink()
    (root / AGENT).symlink_to(root / "copy.md")
    assert _failure(root) == f"owned {AGENT} target is a symbolic link"


def test_owned_path_that_is_a_directory(tmp_path: Path) -> None:
    """An owned path that is a directory is not a regular file."""
    root = _built(tmp_path)
    (root / AGENT).unlink()
    (root / AGENT).mkdir()
    assert _failure(root) == f"owned {AGENT} target is not a regular file"


def test_symlinked_output_directory(tmp_path: Path) -> None:
    """A symlinked parent directory of an owned file is refused."""
    root = _built(tmp_path)
    (root / ".opencode").rename(root / "elsewhere")
    (root / ".opencode").symlink_to(root / "elsewhere", target_is_directory=True)
    assert _failure(root) == f"a parent of {AGENT} is a symbolic link"


def test_symlinked_manifest(tmp_path: Path) -> None:
    """A manifest that is a symlink is refused, even when it points at a valid manifest."""
    root = _built(tmp_path)
    (root / MANIFEST).rename(root / "manifest.json")
    (root / MANIFEST).symlink_to(root / "manifest.json")
    assert _failure(root) == f"ownership manifest {MANIFEST} is a symbolic link"


def test_dangling_manifest_symlink(tmp_path: Path) -> None:
    """A dangling manifest symlink is refused as a symlink, not reported as missing."""
    root = _built(tmp_path)
    (root / MANIFEST).unlink()
    (root / MANIFEST).symlink_to(root / "nowhere.json")
    assert _failure(root) == f"ownership manifest {MANIFEST} is a symbolic link"


def test_symlinked_atlante_directory(tmp_path: Path) -> None:
    """A symlinked .atlante directory is refused."""
    root = _built(tmp_path)
    (root / ".atlante").rename(root / "state")
    (root / ".atlante").symlink_to(root / "state", target_is_directory=True)
    assert _failure(root) == f"a parent of {MANIFEST} is a symbolic link"


def test_atlante_is_a_file(tmp_path: Path) -> None:
    """A regular file where the .atlante directory should be is refused."""
    root = tmp_path / "p"
    root.mkdir()
    (root / ".atlante").write_text("", encoding="utf-8")
    assert _failure(root) == f"a parent of {MANIFEST} is not a directory"


def test_manifest_that_is_a_directory(tmp_path: Path) -> None:
    """A directory in place of the manifest is not a regular file."""
    root = tmp_path / "p"
    (root / MANIFEST).mkdir(parents=True)
    assert _failure(root) == f"ownership manifest {MANIFEST} is not a regular file"


@pytest.mark.timeout(10)
def test_manifest_that_is_a_fifo_does_not_block(tmp_path: Path) -> None:
    """A named pipe in place of the manifest is refused without waiting for a writer."""
    root = tmp_path / "p"
    (root / ".atlante").mkdir(parents=True)
    os.mkfifo(root / MANIFEST)
    assert _failure(root) == f"ownership manifest {MANIFEST} is not a regular file"


def test_project_root_must_be_a_real_directory(tmp_path: Path) -> None:
    """A missing or symlinked project root is refused."""
    with pytest.raises(NativeOutputsError, match="is missing"):
        read_native_outputs(tmp_path / "none", "opencode")
    root = _built(tmp_path)
    (tmp_path / "alias").symlink_to(root, target_is_directory=True)
    with pytest.raises(NativeOutputsError, match="is not a real directory"):
        read_native_outputs(tmp_path / "alias", "opencode")


def test_unknown_host(tmp_path: Path) -> None:
    """A host without a manifest layout is refused, both raw and as a diagnostic."""
    root = _built(tmp_path)
    assert _failure(root, "cursor") == "unsupported eval host 'cursor'"
    with pytest.raises(DiagnosticError) as caught:
        verify_native_outputs(root, "cursor")
    assert caught.value.diagnostics[0].expected == "verified native cursor outputs"
