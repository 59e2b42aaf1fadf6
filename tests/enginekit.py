"""Small builders for engine-level tests: scenarios, native outputs, plans, an instant host."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from factory import scenario as scenario_document

from atlante_eval import SessionEnd, SessionUsage, TrialContext
from atlante_eval.project import NativeOutputs, Plan, Scenario, make_plan
from atlante_eval.project.native import NativeFile
from atlante_eval.project.scenarios import Origin, ScenarioDocument
from atlante_eval.report import MetaConfig


def make_scenario(root: Path, name: str = "basic", **fields: Any) -> Scenario:
    """A validated Scenario whose fixture path is relative to ``root`` (not checked)."""
    document = ScenarioDocument.model_validate(scenario_document(name, **fields))
    return Scenario(
        document=document,
        source=f"eval/scenarios/{name}.eval.json",
        path=root / "eval" / "scenarios" / f"{name}.eval.json",
        origin=Origin(kind="project", root=root),
    )


def native_outputs(files: dict[str, bytes] | None = None) -> NativeOutputs:
    """NativeOutputs holding ``files`` (default: one OpenCode agent file)."""
    files = {".opencode/agents/reviewer.md": b"You review code.\n"} if files is None else files
    entries = tuple(
        NativeFile(
            kind="agent",
            id=Path(path).stem,
            path=path,
            sha256=hashlib.sha256(content).hexdigest(),
            content=content,
        )
        for path, content in sorted(files.items())
    )
    digest = hashlib.sha256(json.dumps(sorted(files)).encode()).hexdigest()
    return NativeOutputs(
        host="opencode",
        manifest_path=".atlante/opencode-native.json",
        files=entries,
        digest=digest,
    )


def plan_of(
    scenarios: Sequence[Scenario],
    *,
    trials: int = 1,
    timeout_ms: int = 10_000,
    max_sessions: int = 15,
    max_tokens: int = 400_000,
) -> Plan:
    """A plan over ``scenarios`` with the given budget."""
    config = MetaConfig(
        trials=trials,
        timeout_ms=timeout_ms,
        max_sessions=max_sessions,
        max_tokens=max_tokens,
        setup_timeout_ms=300_000,
        check_timeout_default_ms=120_000,
    )
    return make_plan(tuple(scenarios), config)


class InstantHost:
    """A host whose session returns at once without starting a process."""

    name = "instant"
    version: str | None = None
    ignored_changes: Sequence[str] = ()

    def __init__(self, *, fail: str | None = None, crash: bool = False) -> None:
        self.fail = fail
        self.crash = crash
        self.sessions = 0

    async def probe(self) -> None:
        """Nothing to probe."""

    def check_pass_env(self, pass_env: Sequence[str]) -> None:
        """Accept every ``--pass-env`` name."""

    def prepare(self, context: TrialContext) -> None:
        """Write nothing."""

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Return at once (or fail / crash as configured)."""
        self.sessions += 1
        if self.crash:
            raise RuntimeError("host exploded")
        return SessionEnd(error=self.fail)


#: Masks for values that change between runs, applied to report JSON text.
#: A mask's replacement: text, or a function of the match.
Replacement = str | Callable[[re.Match[str]], str]

MASKS: list[tuple[re.Pattern[str], Replacement]] = [
    (re.compile(r'"(runId|run_id)": "[^"]+"'), r'"\1": "<run-id>"'),
    (
        re.compile(r'"(startedAt|endedAt)": "[^"]+"'),
        r'"\1": "<timestamp>"',
    ),
    (
        re.compile(r'"(durationMs|wallTimeMs|meanDurationMs|durationP95Ms)": \d+'),
        r'"\1": 0',
    ),
    (
        re.compile(r'"(manifestDigest|planDigest|fingerprint|definition)": "[0-9a-f]+"'),
        r'"\1": "<digest>"',
    ),
    (re.compile(r'"(atlante)": "[^"]+"'), r'"\1": "<version>"'),
    (re.compile(r"index [0-9a-f]{7,}\.\.[0-9a-f]{7,}"), "index <blob>..<blob>"),
    # what a final state stores depends on timing (.git's index, racy files, sharing)
    (re.compile(r'"finalState": \{[^{}]*\}'), lambda found: _final_state_masked(found.group(0))),
]


def _final_state_masked(text: str) -> str:
    """A report's ``finalState`` with its timing-dependent values masked (still valid)."""
    text = re.sub(r'"digest": "[0-9a-f]+"', '"digest": "<digest>"', text)
    return re.sub(r'"(files|bytes|storedBytes)": \d+', r'"\1": 0', text)
