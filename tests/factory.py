"""Build real Atlante projects on disk for tests: config, scenarios, fixtures, native outputs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

SCENARIO_URI = "https://atlante.sh/schema/v0.1/eval-scenario.json"
SCHEMA_V01 = "https://atlante.sh/schema/v0.1/schema.json"
SCHEMA_V02 = "https://atlante.sh/schema/v0.2/schema.json"

NATIVE_LAYOUT = {
    "opencode": (
        ".atlante/opencode-native.json",
        "atlante-opencode-native",
        ".opencode/agents",
        ".opencode/skills/atlante",
    ),
    "claude-code": (
        ".atlante/claude-code-native.json",
        "atlante-claude-code-native",
        ".claude/agents",
        ".claude/skills",
    ),
}


def scenario(
    name: str,
    *,
    fixture: str = "eval/fixtures/app",
    prompt: str = "Do the task.",
    checks: list[dict[str, Any]] | None = None,
    **task_or_top: Any,
) -> dict[str, Any]:
    """Return a valid scenario document; extra keywords go into ``task`` or the top level."""
    task: dict[str, Any] = {"fixture": fixture, "prompt": prompt}
    top: dict[str, Any] = {}
    for key, value in task_or_top.items():
        (task if key in ("setup", "agent") else top)[key] = value
    return {
        "$schema": SCENARIO_URI,
        "version": "0.1",
        "name": name,
        "task": task,
        "checks": [{"type": "file-exists", "path": "README.md"}] if checks is None else checks,
        **top,
    }


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    return path


def write_native(
    root: Path,
    host: str = "opencode",
    *,
    agents: dict[str, str] | None = None,
    skills: dict[str, str] | None = None,
) -> Path:
    """Write native agent/skill files and a correct ownership manifest; return the manifest."""
    manifest_path, fmt, agent_dir, skill_dir = NATIVE_LAYOUT[host]
    agents = {"reviewer": "You review code."} if agents is None else agents
    skills = {} if skills is None else skills
    entries = []
    for kind, items, template in (
        ("agent", agents, "{dir}/{id}.md"),
        ("skill", skills, "{dir}/{id}/SKILL.md"),
    ):
        for item_id, body in items.items():
            rel = template.format(dir=agent_dir if kind == "agent" else skill_dir, id=item_id)
            content = f'---\ndescription: "{item_id}"\n---\n{body}'.encode()
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(content)
            entries.append(
                {
                    "kind": kind,
                    "id": item_id,
                    "path": rel,
                    "sha256": hashlib.sha256(content).hexdigest(),
                }
            )
    entries.sort(key=lambda e: e["path"])
    return write_json(root / manifest_path, {"format": fmt, "version": 1, "files": entries})


def make_project(
    root: Path,
    *,
    host: str = "opencode",
    scenarios: list[dict[str, Any]] | None = None,
    fixtures: dict[str, dict[str, str]] | None = None,
    eval_extra: dict[str, Any] | None = None,
    top_extra: dict[str, Any] | None = None,
    native: bool = True,
    glob: str = "eval/scenarios/*.eval.json*",
    config_name: str = "atlante.jsonc",
) -> Path:
    """Create a complete, valid project under ``root`` and return ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    hosts = ["opencode", "claude-code"] if host == "claude-code" else ["opencode"]
    config: dict[str, Any] = {
        "$schema": SCHEMA_V02 if host == "claude-code" else SCHEMA_V01,
        "hosts": hosts,
        "agents": {"reviewer": "@atlante/pack/agent"},
        "eval": {"host": host, "scenarios": glob, **(eval_extra or {})},
        **(top_extra or {}),
    }
    write_json(root / config_name, config)
    for name, files in (fixtures or {"eval/fixtures/app": {"README.md": "hello\n"}}).items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for rel, text in files.items():
            (root / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / name / rel).write_text(text, encoding="utf-8")
    for doc in scenarios if scenarios is not None else [scenario("basic")]:
        write_json(root / "eval" / "scenarios" / f"{doc['name']}.eval.json", doc)
    if native:
        for each in hosts:
            write_native(root, each)
    return root


def make_pack(
    project: Path,
    name: str,
    *,
    version: str = "1.0.0",
    eval_meta: dict[str, Any] | None = None,
    scenarios: list[dict[str, Any]] | None = None,
    fixtures: dict[str, dict[str, str]] | None = None,
    format_marker: Any = 1,
    preset_schema: str = SCHEMA_V01,
    preset_name: str = "atlante.jsonc",
    presets: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """Install a pack under ``project/node_modules`` with an optional eval suite.

    ``presets`` maps sub-paths (``strict``) to extra preset documents written as
    ``<sub>/atlante.jsonc``; ``preset_name`` names the root preset file.
    """
    root = project / "node_modules" / name
    write_json(
        root / "package.json",
        {"name": name, "version": version, "atlante": {"format": format_marker}},
    )
    preset: dict[str, Any] = {"$schema": preset_schema}
    if eval_meta is not None:
        preset["eval"] = eval_meta
    write_json(root / preset_name, preset)
    for sub, document in (presets or {}).items():
        write_json(root / sub / "atlante.jsonc", {"$schema": preset_schema, **document})
    for fixture, files in (fixtures or {"eval/fixtures/pack-app": {"README.md": "pack\n"}}).items():
        for rel, text in files.items():
            (root / fixture / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / fixture / rel).write_text(text, encoding="utf-8")
    for doc in scenarios or []:
        write_json(root / "eval" / "scenarios" / f"{doc['name']}.eval.json", doc)
    return root


def tree_listing(root: Path) -> dict[str, tuple[str, int, int]]:
    """Return every path under ``root`` (no symlink followed) with its kind, size and mtime."""
    listing: dict[str, tuple[str, int, int]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
        size = 0 if kind == "dir" else info.st_size
        listing[path.relative_to(root).as_posix()] = (kind, size, info.st_mtime_ns)
    return listing


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (UTF-8), creating parent directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
