"""Content fingerprints that decide whether a finished trial may be reused.

A scenario's fingerprint covers everything that can change a trial's outcome:
the scenario document (parsed, so comments and formatting do not count), the
fixture's contents, the native-output manifest digest (the harness revision),
the host name and version, the model, and the trial's budget. A plan digest
covers every scenario's fingerprint, the trial count and the session budget, so
shards of one plan can be recognised and shards of different plans refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from .plan import Plan
from .scenarios import Scenario

__all__ = ["definition_digest", "fixture_digest", "plan_digest", "scenario_fingerprint"]


def fixture_digest(root: Path) -> str:
    """SHA-256 over the fixture tree: each regular file's path, exec bit and content."""
    digest = hashlib.sha256()
    for relative, path in sorted(_files(root)):
        info = os.lstat(path)
        content = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                content.update(chunk)
        executable = "x" if info.st_mode & stat.S_IXUSR else "-"
        line = f"{relative}\0{executable}\0{content.hexdigest()}\n"
        digest.update(line.encode("utf-8", errors="surrogateescape"))  # names are bytes
    return digest.hexdigest()


def _files(root: Path) -> Iterable[tuple[str, Path]]:
    stack = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            relative = f"{prefix}{entry.name}"
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), f"{relative}/"))
            elif entry.is_file(follow_symlinks=False):
                yield relative, Path(entry.path)


def definition_digest(scenario: Scenario, *, fixture: str | None = None) -> str:
    """Digest of what the scenario itself defines: its parsed document and fixture.

    Unlike :func:`scenario_fingerprint` it ignores the harness, host, model and
    budget, so two runs of different harness revisions can tell whether the
    scenario changed between them. ``fixture`` is the fixture's
    :func:`fixture_digest` when it was computed already.
    """
    material = {
        "document": scenario.document.model_dump(mode="json", by_alias=True, exclude_none=True),
        "fixture": fixture if fixture is not None else fixture_digest(scenario.fixture_path),
    }
    encoded = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()


def scenario_fingerprint(
    scenario: Scenario,
    *,
    manifest_digest: str,
    host: str,
    host_version: str | None,
    model: str | None,
    timeout_ms: int,
    max_tokens: int,
    definition: str | None = None,
) -> str:
    """Fingerprint of one scenario's trials under this run's conditions."""
    material = {
        "definition": definition if definition is not None else definition_digest(scenario),
        "manifest": manifest_digest,
        "host": host,
        "hostVersion": host_version,
        "model": model,
        "timeoutMs": timeout_ms,
        "maxTokens": max_tokens,
    }
    encoded = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()


def plan_digest(plan: Plan, fingerprints: dict[str, str]) -> str:
    """Digest of a plan: scenario fingerprints, trials per scenario and the session budget."""
    material: dict[str, object] = {
        "scenarios": [[s.name, fingerprints[s.name]] for s in plan.scenarios],
        "trials": plan.config.trials,
        "maxSessions": plan.config.max_sessions,
    }
    if plan.arms:  # arms: every arm's fingerprints, and the order of the blocks
        keys = sorted({t.key for t in plan.trials})
        material["arms"] = [[key, fingerprints[key]] for key in keys]
        material["seed"] = plan.seed
    encoded = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()
