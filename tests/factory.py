"""Build real Atlante projects on disk for tests: config, scenarios, fixtures, native outputs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCENARIO_URI = "https://atlante.sh/schema/v0.1/eval-scenario.json"
EXTENDED_SCENARIO_URI = "https://atlante.sh/schema/atlante-eval/v1/eval-scenario.json"
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


#: A check as a scenario document writes it (JSON object).
CheckDoc = dict[str, Any]


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


def make_multi_project(root: Path, *, host: str = "opencode") -> Path:
    """A project with three local scenarios and three packs (two included, one not)."""
    make_project(
        root,
        host=host,
        scenarios=[
            scenario("local-b", agent="reviewer"),
            scenario("local-a", description="First local scenario."),
            scenario(
                "local-c",
                fixture="eval/fixtures/other",
                checks=[
                    {"type": "command", "run": ["bun", "test"], "outputMatches": r"\d+ pass"},
                    {"type": "file-contains", "path": "a.ts", "pattern": "x", "regex": True},
                    {"type": "diff-allowlist", "allow": ["a.ts"]},
                ],
            ),
        ],
        fixtures={
            "eval/fixtures/app": {"README.md": "app\n"},
            "eval/fixtures/other": {"src/a.ts": "export {}\n"},
        },
        eval_extra={"include": ["@acme/neutral", "@acme/matching/strict"]},
        top_extra={
            "$schema": SCHEMA_V02,
            "extends": ["@acme/neutral", "@acme/matching/strict", "@acme/unincluded"],
        },
    )
    suite = {"scenarios": "eval/scenarios/*.eval.json"}
    make_pack(
        root,
        "@acme/neutral",
        eval_meta=suite,
        scenarios=[scenario("neutral-one", fixture="eval/fixtures/pack-app")],
    )
    make_pack(
        root,
        "@acme/matching",
        version="2.1.0",
        eval_meta={**suite, "host": host},
        scenarios=[scenario("matching-one", fixture="eval/fixtures/pack-app")],
        preset_schema=SCHEMA_V02,
        presets={"strict": {}},
    )
    make_pack(
        root,
        "@acme/unincluded",
        eval_meta=suite,
        scenarios=[scenario("unincluded-one", fixture="eval/fixtures/pack-app")],
    )
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


# --- a catalog of broken projects, shared by the library and CLI tests ---------------


@dataclass(frozen=True)
class BadProject:
    """A project broken in one way, and the single diagnostic ``validate`` must report."""

    id: str
    build: Callable[[Path], Path]
    """Create the project under the given directory; return the path to validate."""
    code: str
    pointer: str | None = None
    location: tuple[int, int] | None = None
    source: str | None = None


def _valid(root: Path, **kwargs: Any) -> Path:
    return make_project(root, **kwargs)


def _config(root: Path, text: str, name: str = "atlante.jsonc") -> Path:
    make_project(root)
    (root / "atlante.jsonc").unlink()
    write_text(root / name, text)
    return root


def _config_bytes(root: Path, content: bytes) -> Path:
    make_project(root)
    (root / "atlante.jsonc").write_bytes(content)
    return root


def _scenario_bytes(root: Path, content: bytes) -> Path:
    make_project(root)
    (root / "eval" / "scenarios" / "broken.eval.json").write_bytes(content)
    return root


def _one_scenario(root: Path, document: dict[str, Any], **kwargs: Any) -> Path:
    return make_project(root, scenarios=[document], **kwargs)


def _fixture_with(root: Path, plant: Callable[[Path], None]) -> Path:
    make_project(root)
    plant(root / "eval" / "fixtures" / "app")
    return root


def _with_pack(
    root: Path,
    *,
    include: list[str] | None,
    host: str = "opencode",
    meta: dict[str, Any] | None = None,
    preset_schema: str = SCHEMA_V01,
) -> Path:
    eval_extra = {"include": include} if include is not None else {}
    make_project(root, host=host, eval_extra=eval_extra, top_extra={"extends": ["@acme/review"]})
    make_pack(
        root,
        "@acme/review",
        eval_meta=meta,
        scenarios=[scenario("pack-one", fixture="eval/fixtures/pack-app")],
        preset_schema=preset_schema,
    )
    return root


def _native(root: Path, change: Callable[[Path], object]) -> Path:
    make_project(root)
    change(root)
    return root


def _symlink_manifest(root: Path) -> None:
    manifest = root / ".atlante" / "opencode-native.json"
    manifest.rename(root / "manifest.json")
    manifest.symlink_to(root / "manifest.json")


def _big_scenario(root: Path) -> Path:
    make_project(root)
    with (root / "eval" / "scenarios" / "big.eval.json").open("wb") as handle:
        handle.truncate(10 * 1024 * 1024)
    return root


def _empty_dir(root: Path) -> Path:
    root.mkdir(parents=True)
    return root


def _both_configs(root: Path) -> Path:
    write_json(make_project(root) / "atlante.json", {"$schema": SCHEMA_V01})
    return root


def _symlinked_fixture(root: Path) -> Path:
    fixtures = {"eval/fixtures/real": {"README.md": "x"}}
    make_project(
        root, scenarios=[scenario("basic", fixture="eval/fixtures/link")], fixtures=fixtures
    )
    (root / "eval" / "fixtures" / "link").symlink_to(root / "eval" / "fixtures" / "real")
    return root


def _plant_git(fixture: Path) -> None:
    write_text(fixture / ".git" / "HEAD", "ref: refs/heads/main\n")


def _duplicate_names(root: Path) -> Path:
    write_json(make_project(root) / "eval" / "scenarios" / "copy.eval.json", scenario("basic"))
    return root


def _unreadable_pack_preset(root: Path) -> Path:
    _with_pack(root, include=["@acme/review"], meta=_SUITE)
    write_text(root / "node_modules" / "@acme" / "review" / "atlante.jsonc", "{ nope")
    return root


_SUITE = {"scenarios": "eval/scenarios/*.eval.json"}
_SCENARIO = "eval/scenarios/basic.eval.json"
_BAD_CONFIG = '{\n  "$schema": "https://atlante.sh/schema/v0.1/schema.json",\n  "eval": {\n'

#: Every way the issue lists to break a project, each with its one expected diagnostic.
BAD_PROJECTS: tuple[BadProject, ...] = (
    BadProject("missing-config", _empty_dir, "eval-not-configured"),
    BadProject(
        "ambiguous-config",
        _both_configs,
        "ambiguous-config",
    ),
    BadProject(
        "no-eval-section",
        lambda r: _config(r, json.dumps({"$schema": SCHEMA_V01, "hosts": ["opencode"]})),
        "eval-not-configured",
        source="atlante.jsonc",
    ),
    BadProject(
        "malformed-jsonc",
        lambda r: _config(r, _BAD_CONFIG + '    "host": "opencode"\n    "scenarios": "x"\n}}'),
        "malformed-jsonc",
        location=(5, 5),
        source="atlante.jsonc",
    ),
    BadProject(
        "malformed-json",
        lambda r: _config(r, "{\n  // comments need .jsonc\n}", name="atlante.json"),
        "malformed-jsonc",
        location=(2, 3),
        source="atlante.json",
    ),
    BadProject("empty-config", lambda r: _config(r, ""), "malformed-jsonc", location=(1, 1)),
    BadProject("non-utf8-config", lambda r: _config_bytes(r, b"{\xff}"), "config-unreadable"),
    BadProject(
        "unknown-eval-key",
        lambda r: _valid(r, eval_extra={"retries": 3}),
        "invalid-document",
        "/eval/retries",
        (12, 5),
        "atlante.jsonc",
    ),
    BadProject(
        "wrong-schema",
        lambda r: _valid(r, top_extra={"$schema": "https://atlante.sh/schema/v9/schema.json"}),
        "unsupported-schema",
        "/$schema",
        (2, 3),
    ),
    BadProject(
        "trials-0",
        lambda r: _valid(r, eval_extra={"budget": {"trials": 0}}),
        "invalid-document",
        "/eval/budget/trials",
        (13, 7),
    ),
    BadProject(
        "trials-51",
        lambda r: _valid(r, eval_extra={"budget": {"trials": 51}}),
        "invalid-document",
        "/eval/budget/trials",
        (13, 7),
    ),
    BadProject(
        "v01-claude-code",
        lambda r: _valid(r, top_extra={"hosts": ["opencode"]}, eval_extra={"host": "claude-code"}),
        "invalid-document",
        "/eval/host",
        (10, 5),
    ),
    BadProject(
        "host-not-materialized",
        lambda r: _valid(
            r,
            top_extra={"$schema": SCHEMA_V02, "hosts": ["opencode"]},
            eval_extra={"host": "claude-code"},
        ),
        "eval-host-not-materialized",
        "/eval/host",
        (10, 5),
    ),
    BadProject(
        "bad-slug",
        lambda r: _one_scenario(r, scenario("Bad_Slug")),
        "invalid-eval-scenario",
        "/name",
        (4, 3),
        "eval/scenarios/Bad_Slug.eval.json",
    ),
    BadProject(
        "zero-checks",
        lambda r: _one_scenario(r, scenario("basic", checks=[])),
        "invalid-eval-scenario",
        "/checks",
        (9, 3),
        _SCENARIO,
    ),
    BadProject(
        "absolute-fixture",
        lambda r: _one_scenario(r, scenario("basic", fixture="/etc")),
        "invalid-eval-scenario",
        "/task/fixture",
        (6, 5),
        _SCENARIO,
    ),
    BadProject(
        "behaviour-check-in-v0.1",
        lambda r: _one_scenario(
            r, scenario("basic", checks=[{"type": "skill-used", "skill": "python-tests"}])
        ),
        "scenario-extension-check",
        "/checks/0/type",
        (11, 7),
        _SCENARIO,
    ),
    BadProject(
        "tool-and-kind",
        lambda r: _one_scenario(
            r,
            scenario(
                "basic",
                checks=[{"type": "tool-used", "tool": "Bash", "kind": "shell"}],
                **{"$schema": EXTENDED_SCENARIO_URI},
            ),
        ),
        "invalid-eval-scenario",
        "/checks/0",
        (10, 5),
        _SCENARIO,
    ),
    BadProject(
        "bad-input-matches",
        lambda r: _one_scenario(
            r,
            scenario(
                "basic",
                checks=[{"type": "tool-not-used", "kind": "shell", "inputMatches": "rm ("}],
                **{"$schema": EXTENDED_SCENARIO_URI},
            ),
        ),
        "invalid-eval-scenario",
        "/checks/0/inputMatches",
        (13, 7),
        _SCENARIO,
    ),
    BadProject(
        "dotdot-check-path",
        lambda r: _one_scenario(
            r, scenario("basic", checks=[{"type": "file-exists", "path": "../x"}])
        ),
        "invalid-eval-scenario",
        "/checks/0/path",
        (12, 7),
        _SCENARIO,
    ),
    BadProject(
        "invalid-regex",
        lambda r: _one_scenario(
            r, scenario("basic", checks=[{"type": "command", "run": ["x"], "outputMatches": "("}])
        ),
        "invalid-eval-scenario",
        "/checks/0/outputMatches",
        (15, 7),
        _SCENARIO,
    ),
    BadProject(
        "scenario-wrong-schema",
        lambda r: _one_scenario(r, {**scenario("basic"), "$schema": "https://x"}),
        "unsupported-schema",
        "/$schema",
        (2, 3),
        _SCENARIO,
    ),
    BadProject(
        "fixture-missing",
        lambda r: _one_scenario(r, scenario("basic", fixture="eval/fixtures/none")),
        "invalid-scenario-fixture",
        "/task/fixture",
        (6, 5),
        _SCENARIO,
    ),
    BadProject(
        "fixture-is-a-file",
        lambda r: _one_scenario(r, scenario("basic", fixture="eval/fixtures/app/README.md")),
        "invalid-scenario-fixture",
        "/task/fixture",
        (6, 5),
    ),
    BadProject(
        "fixture-is-a-symlink",
        _symlinked_fixture,
        "invalid-scenario-fixture",
        "/task/fixture",
    ),
    BadProject(
        "fixture-contains-symlink",
        lambda r: _fixture_with(r, lambda f: (f / "passwd").symlink_to("/etc/passwd")),
        "invalid-scenario-fixture",
        "/task/fixture",
    ),
    BadProject(
        "fixture-contains-git",
        lambda r: _fixture_with(r, _plant_git),
        "invalid-scenario-fixture",
        "/task/fixture",
    ),
    BadProject(
        "duplicate-names",
        _duplicate_names,
        "duplicate-scenario-name",
        "/name",
        (4, 3),
        "eval/scenarios/copy.eval.json",
    ),
    BadProject(
        "glob-matches-nothing",
        lambda r: _valid(r, glob="eval/none/*.json"),
        "empty-scenario-glob",
        "/eval/scenarios",
        (11, 5),
        "atlante.jsonc",
    ),
    BadProject(
        "absolute-glob",
        lambda r: _valid(r, glob="/eval/*.json"),
        "invalid-scenario-glob",
        "/eval/scenarios",
        (11, 5),
    ),
    BadProject(
        "dotdot-glob",
        lambda r: _valid(r, glob="../eval/*.json"),
        "invalid-scenario-glob",
        "/eval/scenarios",
    ),
    BadProject(
        "non-utf8-scenario",
        lambda r: _scenario_bytes(r, b'{"name": "\xff"}'),
        "scenario-unreadable",
        source="eval/scenarios/broken.eval.json",
    ),
    BadProject(
        "empty-scenario",
        lambda r: _scenario_bytes(r, b""),
        "invalid-json",
        location=(1, 1),
        source="eval/scenarios/broken.eval.json",
    ),
    BadProject(
        "malformed-scenario",
        lambda r: _scenario_bytes(r, b'{\n  "name": "x",\n}'),
        "invalid-json",
        location=(3, 1),
    ),
    BadProject("ten-megabyte-scenario", _big_scenario, "scenario-unreadable"),
    BadProject(
        "unknown-include",
        lambda r: _with_pack(r, include=["@acme/other"], meta=_SUITE),
        "eval-include-not-found",
        "/eval/include/0",
        (13, 7),
    ),
    BadProject(
        "invalid-include",
        lambda r: _with_pack(r, include=["./local"], meta=_SUITE),
        "invalid-eval-include",
        "/eval/include/0",
        (13, 7),
    ),
    BadProject(
        "include-without-suite",
        lambda r: _with_pack(r, include=["@acme/review"], meta=None),
        "eval-include-no-suite",
        "/eval/include/0",
        (13, 7),
    ),
    BadProject(
        "invalid-pack-eval",
        lambda r: _with_pack(r, include=["@acme/review"], meta={**_SUITE, "runs": 1}),
        "invalid-pack-eval",
        "/eval/runs",
        (5, 5),
        "@acme/review@1.0.0/atlante.jsonc",
    ),
    BadProject(
        "pack-eval-unreadable",
        _unreadable_pack_preset,
        "pack-eval-unreadable",
        location=(1, 7),
        source="@acme/review@1.0.0/atlante.jsonc",
    ),
    BadProject(
        "incompatible-pack-host",
        lambda r: _with_pack(
            r,
            include=["@acme/review"],
            host="claude-code",
            meta={**_SUITE, "host": "opencode"},
            preset_schema=SCHEMA_V02,
        ),
        "eval-pack-host-incompatible",
        source="@acme/review@1.0.0/eval/scenarios/pack-one.eval.json",
    ),
    BadProject(
        "manifest-missing",
        lambda r: _valid(r, native=False),
        "native-outputs-not-verified",
        source=".atlante",
    ),
    BadProject(
        "manifest-malformed",
        lambda r: _native(r, lambda p: write_text(p / ".atlante/opencode-native.json", "{")),
        "native-outputs-not-verified",
    ),
    BadProject(
        "manifest-drifted",
        lambda r: _native(r, lambda p: write_text(p / ".opencode/agents/reviewer.md", "edit")),
        "native-outputs-not-verified",
    ),
    BadProject(
        "manifest-symlinked",
        lambda r: _native(r, _symlink_manifest),
        "native-outputs-not-verified",
    ),
)
