#!/usr/bin/env python3
"""Write (or check) the native-output manifests of a hand-made Atlante project.

``atlante build`` renders agents and skills into host-native files and records each
file's SHA-256 in an ownership manifest, which ``atlante-eval`` verifies before any
trial. Examples and test projects in this repository carry hand-written native
files instead of a build; this script scans them and writes the manifests the
build would have written:

    .atlante/opencode-native.json      .opencode/agents/<id>.md
                                       .opencode/skills/atlante/<id>/SKILL.md
    .atlante/claude-code-native.json   .claude/agents/<id>.md
                                       .claude/skills/<id>/SKILL.md

A host gets a manifest only when its directory exists; a project with no native
directory at all is an error (exit 2). Entries are sorted by path;
the file is two-space JSON with a trailing newline, exactly the build's format.

Usage:
    python3 tools/native_manifest.py examples/quickstart          # write
    python3 tools/native_manifest.py --check examples/quickstart  # exit 1 when stale

Standard library only, so it runs before the package is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

#: host: (manifest path, format, agents directory, skills directory)
LAYOUTS = {
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
_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def _entry(root: Path, kind: str, file_id: str, path: Path) -> dict[str, str]:
    if not _ID.match(file_id) or len(file_id) > 64:
        raise SystemExit(f"error: {path.relative_to(root)}: {file_id!r} is not a valid id")
    if path.is_symlink() or not path.is_file():
        raise SystemExit(f"error: {path.relative_to(root)} is not a regular file")
    return {
        "kind": kind,
        "id": file_id,
        "path": path.relative_to(root).as_posix(),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }


def manifest(root: Path, host: str) -> str | None:
    """Return the manifest text for ``host``, or ``None`` when it has no native files."""
    _, fmt, agents_dir, skills_dir = LAYOUTS[host]
    agents = root / agents_dir
    skills = root / skills_dir
    if not agents.is_dir() and not skills.is_dir():
        return None
    entries = []
    if agents.is_dir():
        entries += [_entry(root, "agent", p.stem, p) for p in sorted(agents.glob("*.md"))]
    if skills.is_dir():
        entries += [
            _entry(root, "skill", p.parent.name, p) for p in sorted(skills.glob("*/SKILL.md"))
        ]
    entries.sort(key=lambda e: e["path"])
    return json.dumps({"format": fmt, "version": 1, "files": entries}, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write or check the manifests of each project given; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("projects", nargs="+", type=Path, help="project directories")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a manifest is stale"
    )
    args = parser.parse_args(argv)
    stale = 0
    for root in args.projects:
        if not root.is_dir():
            print(f"error: {root} is not a directory", file=sys.stderr)
            return 2
        found = False
        for host, (manifest_path, *_rest) in LAYOUTS.items():
            text = manifest(root, host)
            if text is None:
                continue
            found = True
            target = root / manifest_path
            current = target.read_text(encoding="utf-8") if target.is_file() else None
            if current == text:
                print(f"ok: {target}")
                continue
            if args.check:
                print(f"stale: {target}", file=sys.stderr)
                stale += 1
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            print(f"wrote: {target}")
        if not found:
            layouts = ", ".join(f"{v[2]}/ or {v[3]}/" for v in LAYOUTS.values())
            print(
                f"error: {root} has no native outputs to record (looked for {layouts})",
                file=sys.stderr,
            )
            return 2
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
