"""The selftest page as data: each scenario's stand-in agents and whether each did as it must.

A selftest report (``meta.host`` ``"selftest"``) is no run of an agent: its
trials are the null agent (changes nothing: must not pass), the reference agent
(applies the reference solution: must pass) and the cheats (counter-solutions and
generic mutants: must be caught). Its pass rates mean nothing, so
:func:`selftest_page` lays it out as scenarios x agents, each cell saying what
the agent did against what it must do, with the verdict of ``selftest.json``
(written beside the report) when there is one, and each trial's panel below.
Everything text here is as recorded (untrusted): the template escapes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...report import RunFiles, RunReport, TrialResult
from ..run_setup import setup_facts
from ..trial import build_trial_view
from .run_page import anchor_of
from .trial import PAGE_CAPS, TrialPanel, allowances, trial_panel

__all__ = ["SELFTEST_FILE", "SelftestCell", "SelftestPage", "SelftestRow", "read_analysis"]

#: The selftest's analysis beside its report.
SELFTEST_FILE = "selftest.json"
#: Most bytes of ``selftest.json`` read.
_ANALYSIS_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SelftestCell:
    """One stand-in agent's trial of a scenario."""

    agent: str
    """``null``, ``reference``, ``counter`` or ``mutant``."""
    label: str | None
    """The counter-solution's or mutant's name."""
    verdict: str
    """The trial's verdict."""
    outcome: str
    """What that means: ``fails, as it must``, ``caught``, ``missed``, ..."""
    good: bool
    """The agent did as it must."""
    anchor: str
    """The trial's panel."""


@dataclass(frozen=True, slots=True)
class SelftestRow:
    """One scenario: its agents and the selftest's verdict on it."""

    name: str
    anchor: str
    null: SelftestCell | None
    reference: SelftestCell | None
    cheats: list[SelftestCell]
    ok: bool
    verdict: str
    panels: list[TrialPanel]


@dataclass(frozen=True, slots=True)
class SelftestPage:
    """The whole selftest page."""

    title: str
    run_id: str
    facts: list[tuple[str, str]]
    ok: bool
    headline: str
    rows: list[SelftestRow]


def read_analysis(run_dir: Path | None) -> Mapping[str, Any] | None:
    """``selftest.json`` beside the report as JSON, if it is a readable regular file."""
    if run_dir is None:
        return None
    try:
        fd = os.open(run_dir / SELFTEST_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(_ANALYSIS_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _ANALYSIS_BYTES:
        return None
    with contextlib.suppress(ValueError):
        value = json.loads(data)
        return value if isinstance(value, dict) else None
    return None


def _outcome(agent: str, verdict: str, *, must_pass: bool) -> tuple[str, bool]:
    """What a trial's verdict says of its agent, by the report alone."""
    if verdict not in ("pass", "fail"):
        return f"no verdict ({verdict})", False
    passed = verdict == "pass"
    if agent in ("counter", "mutant"):
        return ("caught", True) if not passed else ("missed: it passes", False)
    if must_pass:
        return ("passes, as it must", True) if passed else ("fails: no agent can pass", False)
    return ("fails, as it must", True) if not passed else ("passes: the scenario is vacuous", False)


def _judged_outcome(agent: str, judged: Mapping[str, Any], *, must_pass: bool) -> tuple[str, bool]:
    """What the selftest's analysis (an ``AgentOutcome`` or a cheat's) says of an agent."""
    if agent in ("counter", "mutant"):
        caught = judged.get("caught")
        if caught is None:
            return f"no verdict ({judged.get('verdict')})", False
        return ("caught", True) if caught else ("missed: it passes", False)
    unproven = len(judged.get("notSelftested") or [])
    rest = f" ({unproven} behaviour checks not selftested)" if unproven else ""
    if judged.get("erroredChecks"):
        return f"checks reach no verdict{rest}", False
    failed = bool(judged.get("failedChecks"))
    if judged.get("verdict") not in ("pass", "fail"):
        return f"no verdict ({judged.get('verdict')})", False
    if must_pass:
        return (
            ("fails: no agent can pass", False) if failed else (f"passes, as it must{rest}", True)
        )
    if failed:
        return f"fails, as it must{rest}", True
    return "passes: the scenario is vacuous", False


def _judged_of(agent: str, label: object, judged: Mapping[str, Any] | None) -> Any:
    """The analysis's entry for one agent of a scenario, if the analysis has it."""
    if judged is None:
        return None
    if agent == "null":
        return judged.get("nullAgent")
    if agent == "reference":
        return judged.get("referenceAgent")
    cheats = [*(judged.get("counters") or []), *(judged.get("mutants") or [])]
    return next((c for c in cheats if isinstance(c, dict) and c.get("label") == label), None)


def _cell(trial: TrialResult, anchor: str, judged: Mapping[str, Any] | None) -> SelftestCell:
    evidence = trial.host_evidence or {}
    agent = evidence.get("agent")
    agent = agent if isinstance(agent, str) else "null"
    label = evidence.get("label")
    # A null agent applying a no-change solution is that scenario's reference: it must pass.
    must_pass = agent == "reference" or (agent == "null" and "solution" in evidence)
    mine = _judged_of(agent, label, judged)
    if isinstance(mine, dict):
        outcome, good = _judged_outcome(agent, mine, must_pass=must_pass)
    else:
        outcome, good = _outcome(agent, trial.verdict, must_pass=must_pass)
    return SelftestCell(
        agent, label if isinstance(label, str) else None, trial.verdict, outcome, good, anchor
    )


def _scenario_analysis(name: str, analysis: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    scenarios = analysis.get("scenarios") if analysis is not None else None
    judged = scenarios.get(name) if isinstance(scenarios, dict) else None
    return judged if isinstance(judged, dict) else None


def _verdict(
    name: str, cells: list[SelftestCell], analysis: Mapping[str, Any] | None
) -> tuple[bool, str]:
    """The selftest's word on a scenario (``selftest.json``), else the cells' own."""
    judged = _scenario_analysis(name, analysis)
    if judged is not None and isinstance(judged.get("ok"), bool):
        findings = [
            str(code).removeprefix("selftest-")
            for code in judged.get("findings") or []
            if code != "selftest-no-solution"
        ]
        if findings:
            return judged["ok"], ", ".join(dict.fromkeys(findings))
        if judged.get("referenceAgent") is None and not judged.get("noChange"):
            return judged["ok"], "ok (no reference solution)"
        unproven = len(judged.get("notSelftested") or [])
        if judged["ok"] and unproven:
            return True, f"ok ({unproven} behaviour checks not selftested)"
        return judged["ok"], "ok" if judged["ok"] else "not sound"
    ok = all(cell.good for cell in cells)
    return ok, "ok" if ok else "not sound"


def _row(
    position: int,
    name: str,
    report: RunReport,
    analysis: Mapping[str, Any] | None,
    panels: list[TrialPanel],
) -> SelftestRow:
    anchor = anchor_of(position, name)
    trials = sorted(report.scenarios[name].trials, key=lambda t: t.i)
    judged = _scenario_analysis(name, analysis)
    cells = [_cell(t, f"{anchor}-t{t.i}", judged) for t in trials]
    ok, verdict = _verdict(name, cells, analysis)
    return SelftestRow(
        name=name,
        anchor=anchor,
        null=next((c for c in cells if c.agent == "null"), None),
        reference=next((c for c in cells if c.agent == "reference"), None),
        cheats=[c for c in cells if c.agent in ("counter", "mutant")],
        ok=ok,
        verdict=verdict,
        panels=panels,
    )


def _panels(
    report: RunReport, files: RunFiles | None, links_from: Path | None
) -> dict[str, list[TrialPanel]]:
    keys = [(name, t) for name, r in report.scenarios.items() for t in r.trials]
    shares = allowances([1] * len(keys))
    panels: dict[str, list[TrialPanel]] = {name: [] for name in report.scenarios}
    anchors = {name: anchor_of(p, name) for p, name in enumerate(report.scenarios)}
    for (name, trial), share in zip(keys, shares, strict=True):
        view = build_trial_view(
            trial,
            run_id=report.run_id,
            scenario=name,
            config=report.meta.config,
            files=files,
            caps=PAGE_CAPS,
            prompt=report.scenarios[name].prompt,
        )
        panels[name].append(
            trial_panel(
                view,
                f"{anchors[name]}-t{trial.i}",
                run_dir=files.path if files is not None else None,
                links_from=links_from,
                allowance=share,
            )
        )
    return panels


def _headline(ok: bool, rows: list[SelftestRow], analysis: Mapping[str, Any] | None) -> str:
    total = len(rows)
    noun = "scenario" if total == 1 else "scenarios"
    known = analysis is not None and isinstance(analysis.get("ok"), bool)
    if ok:
        return f"selftest passed: {total} {noun} sound"
    bad = sum(1 for row in rows if not row.ok)
    if not known:
        return f"{bad} of {total} {noun} with an agent that did not do as it must"
    return f"selftest failed: {bad} of {total} {noun} cannot be trusted"


def selftest_page(
    report: RunReport,
    *,
    run_dir: Path | None,
    links_from: Path | None,
    analysis: Mapping[str, Any] | None = None,
) -> SelftestPage:
    """The selftest page of ``report``; ``analysis`` is its ``selftest.json``, when known."""
    if analysis is None:
        analysis = read_analysis(run_dir)
    files: RunFiles | None = None
    if run_dir is not None:
        with contextlib.suppress(OSError):
            files = RunFiles.open_existing(run_dir)
    try:
        panels = _panels(report, files, links_from)
    finally:
        if files is not None:
            files.close()
    rows = [
        _row(position, name, report, analysis, panels[name])
        for position, name in enumerate(report.scenarios)
    ]
    known = analysis.get("ok") if analysis is not None else None
    ok = known if isinstance(known, bool) else all(row.ok for row in rows)
    facts = [(fact.label, fact.value) for fact in setup_facts(report.meta)]
    facts.append(("started", report.meta.started_at or "not recorded"))
    return SelftestPage(
        title=f"atlante-eval selftest {report.run_id}",
        run_id=report.run_id,
        facts=facts,
        ok=ok,
        headline=_headline(ok, rows, analysis),
        rows=rows,
    )
