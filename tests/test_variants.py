"""Arms (eval.variants) with the stand-in host: configuration, interleaving, per-arm results,
uplift, resume and shard + merge (docs/variants.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario, write_native
from standin import StandinHost
from typer.testing import CliRunner

from atlante_eval import RunReport, load_report, merge_reports, run_eval
from atlante_eval.cli import app
from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.hosts import SessionEnd, SessionUsage, TrialContext
from atlante_eval.project.config import load_project
from atlante_eval.report import arm_scenarios
from atlante_eval.report.merge import ShardReport

#: A check that passes only when the native agent file is in the sandbox.
_NEEDS_AGENT = [{"type": "file-exists", "path": ".opencode/agents/reviewer.md"}]


def _project(
    root: Path, variants: list[dict[str, Any]], *, trials: int = 6, **eval_extra: Any
) -> Path:
    return make_project(
        root,
        scenarios=[scenario("needs-agent", agent="reviewer", checks=_NEEDS_AGENT)],
        eval_extra={
            "variants": variants,
            "budget": {"trials": trials, "maxSessions": 200},
            "gateway": "off",
            **eval_extra,
        },
    )


class _Recording(StandinHost):
    """The stand-in, remembering the model and agent each trial's host was given."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str | None, str | None]] = []

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        self.seen.append((context.model, context.agent))
        return await super().run_session(context, usage)


def _run(root: Path, host: StandinHost | None = None, **options: Any) -> RunReport:
    return anyio.run(lambda: run_eval(root, host=host or StandinHost(), **options))


def _verdicts(report: RunReport, arm: str) -> dict[str, list[str]]:
    return {
        name: [t.verdict for t in sorted(result.trials, key=lambda t: t.i)]
        for name, result in arm_scenarios(report, arm).items()
    }


def test_the_project_arm_improves_on_a_none_control(tmp_path: Path) -> None:
    """Only the native agent file makes the scenario pass: uplift says improved."""
    root = _project(
        tmp_path / "p", [{"name": "bare", "harness": "none", "control": True}, {"name": "project"}]
    )
    report = _run(root)
    assert [a.name for a in report.meta.variants or []] == ["bare", "project"]
    assert report.meta.variant_seed is not None
    result = report.scenarios["needs-agent"]
    # The seed fields are the control's view: a reference reader sees the bare arm.
    assert {t.variant for t in result.trials} == {"bare"}
    assert result.pass_rate == 0.0
    assert result.arms is not None
    assert result.arms["project"].pass_rate == 1.0
    assert all(t.variant == "project" for t in result.arms["project"].trials)
    assert all((t.host_evidence or {}).get("agentDropped") == "reviewer" for t in result.trials)
    assert report.uplift is not None
    assert report.uplift.control == "bare"
    row = report.uplift.arms["project"].scenarios["needs-agent"]
    assert (row.control_passed, row.arm_passed, row.arm_graded) == (0, 6, 6)
    assert row.verdict == "improved"
    assert report.uplift.totals["project"].pass_rate == 1.0


def test_none_regresses_against_a_project_control(tmp_path: Path) -> None:
    """The other way round: the bare arm regresses against the harness."""
    root = _project(tmp_path / "p", [{"name": "project"}, {"name": "bare", "harness": "none"}])
    report = _run(root)
    assert report.uplift is not None
    assert report.uplift.control == "project"
    assert report.uplift.arms["bare"].scenarios["needs-agent"].verdict == "regressed"
    assert report.uplift.arms["bare"].overall is not None
    assert report.uplift.arms["bare"].overall.verdict == "regressed"


def test_a_model_arm_reaches_the_host_and_its_trials(tmp_path: Path) -> None:
    """Each arm's model is what its trials' host is given and what they report."""
    root = _project(
        tmp_path / "p",
        [{"name": "big"}, {"name": "small", "model": "prov/small"}],
        trials=2,
        model="prov/big",
    )
    host = _Recording()
    report = _run(root, host)
    assert sorted(host.seen) == [("prov/big", "reviewer")] * 2 + [("prov/small", "reviewer")] * 2
    small = arm_scenarios(report, "small")["needs-agent"]
    assert {t.model for t in small.trials} == {"prov/small"}
    assert {t.model for t in report.scenarios["needs-agent"].trials} == {"prov/big"}
    assert report.meta.model == "prov/big"


def test_a_path_arm_installs_the_other_roots_native_outputs(tmp_path: Path) -> None:
    """A path arm's sandboxes get the other build's agent file, byte for byte."""
    other = tmp_path / "release"
    other.mkdir()
    write_native(other, agents={"reviewer": "LAST RELEASE"})
    check = [
        {"type": "file-contains", "path": ".opencode/agents/reviewer.md", "pattern": "RELEASE"}
    ]
    root = make_project(
        tmp_path / "p",
        scenarios=[scenario("release-agent", agent="reviewer", checks=check)],
        eval_extra={
            "variants": [{"name": "head"}, {"name": "release", "harness": "../release"}],
            "budget": {"trials": 2},
            "gateway": "off",
        },
    )
    report = _run(root)
    assert _verdicts(report, "head") == {"release-agent": ["fail", "fail"]}
    assert _verdicts(report, "release") == {"release-agent": ["pass", "pass"]}
    infos = {a.name: a for a in report.meta.variants or []}
    assert infos["release"].manifest_digest != infos["head"].manifest_digest


def test_a_path_arm_without_verified_outputs_is_refused(tmp_path: Path) -> None:
    """No trial runs when a path arm's root has no verified native outputs (exit 2)."""
    (tmp_path / "empty").mkdir()
    root = _project(tmp_path / "p", [{"name": "head"}, {"name": "old", "harness": "../empty"}])
    with pytest.raises(DiagnosticError) as caught:
        _run(root)
    assert caught.value.exit_code == 2
    assert caught.value.diagnostics[0].code == "variant-harness-not-verified"
    assert not (root / ".atlante" / "eval").exists()


@pytest.mark.parametrize(
    ("variants", "says"),
    [
        ([{"name": "a"}, {"name": "a"}], 'names the arm "a" twice'),
        ([{"name": "a", "control": True}, {"name": "b", "control": True}], "2 control arms"),
        ([{"name": "a", "modle": "x"}], "modle"),
        ([{"name": "no/slash"}], "name"),
    ],
)
def test_bad_variants_are_invalid_documents(
    tmp_path: Path, variants: list[dict[str, Any]], says: str
) -> None:
    """Duplicate names, two controls, unknown keys, bad names: invalid-document at the key."""
    root = _project(tmp_path / "p", variants)
    with pytest.raises(DiagnosticError) as caught:
        load_project(root)
    problem = caught.value.diagnostics[0]
    assert problem.code == "invalid-document"
    assert problem.pointer is not None
    assert problem.pointer.startswith("/eval/variants")
    assert says in problem.message


def test_variant_selection_from_the_cli(tmp_path: Path) -> None:
    """--variant selects arms, --variants none turns them off, an unknown name is exit 2."""
    root = _project(
        tmp_path / "p", [{"name": "bare", "harness": "none"}, {"name": "project"}], trials=1
    )
    chosen = _run(root, variants=["project"])
    assert [a.name for a in chosen.meta.variants or []] == ["project"]
    assert chosen.scenarios["needs-agent"].pass_rate == 1.0
    plain = _run(root, variants="none")
    assert plain.meta.variants is None
    assert plain.uplift is None
    assert plain.scenarios["needs-agent"].trials[0].variant is None
    result = CliRunner().invoke(app, ["run", str(root), "--variant", "nope"])
    assert result.exit_code == 2
    assert "unknown-variant" in result.stderr
    both = CliRunner().invoke(app, ["run", str(root), "--variant", "bare", "--variants", "all"])
    assert both.exit_code == 2
    assert "cannot be combined" in both.stderr


def _start_order(report: RunReport) -> list[str]:
    """The arms of one scenario's trials in the order they started."""
    trials = [
        t for arm in ("a", "b", "c") for t in arm_scenarios(report, arm)["needs-agent"].trials
    ]
    return [t.variant or "" for t in sorted(trials, key=lambda t: t.started_at or "")]


def test_arms_are_interleaved_in_randomized_blocks(tmp_path: Path) -> None:
    """Each block of starts holds every arm once, in a seeded order (not arm after arm)."""
    root = _project(tmp_path / "p", [{"name": "a"}, {"name": "b"}, {"name": "c"}], trials=4)
    report = _run(root, jobs=1)
    order = _start_order(report)
    blocks = [order[i : i + 3] for i in range(0, len(order), 3)]
    assert all(sorted(block) == ["a", "b", "c"] for block in blocks), order
    again = _run(root, jobs=1)
    assert _start_order(again) == order  # the recorded seed gives the same order
    assert again.meta.variant_seed == report.meta.variant_seed


def _per_arm(report: RunReport) -> dict[str, dict[str, list[str]]]:
    return {arm: _verdicts(report, arm) for arm in ("bare", "project")}


def _mixed(root: Path) -> Path:
    """Two scenarios, two arms, four trials each (16 trials)."""
    make_project(
        root,
        scenarios=[
            scenario("needs-agent", agent="reviewer", checks=_NEEDS_AGENT),
            scenario("plain"),
        ],
        eval_extra={
            "variants": [{"name": "bare", "harness": "none"}, {"name": "project"}],
            "budget": {"trials": 4, "maxSessions": 200},
            "gateway": "off",
        },
    )
    return root


def test_resume_after_a_kill_gives_the_same_per_arm_results(tmp_path: Path) -> None:
    """A run cut short (its journal holds some trials) resumes arm by arm."""
    root = _mixed(tmp_path / "p")
    whole = _run(root)
    run_dir = next((root / ".atlante" / "eval").glob("*/report.json")).parent
    journal = run_dir / "journal.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines()
    journal.write_text("\n".join(lines[:8]) + "\n", encoding="utf-8")  # header + 7 trials
    (run_dir / "report.json").unlink()
    host = StandinHost()
    resumed = _run(root, host, resume=run_dir)
    assert host.sessions == 16 - 7
    assert _per_arm(resumed) == _per_arm(whole)
    assert sum(1 for t in resumed.scenarios["plain"].trials if t.reused) >= 0
    reused = [
        t
        for arm in ("bare", "project")
        for r in arm_scenarios(resumed, arm).values()
        for t in r.trials
        if t.reused
    ]
    assert len(reused) == 7
    assert resumed.uplift is not None
    assert whole.uplift is not None
    assert resumed.uplift.totals == whole.uplift.totals


def test_shards_merge_into_the_same_per_arm_results(tmp_path: Path) -> None:
    """--shard 1/2 and 2/2 merged give every arm's trials, and the same uplift."""
    root = _mixed(tmp_path / "p")
    whole = _run(root)
    shards = [_run(root, shard=f"{i}/2", out=tmp_path / f"s{i}") for i in (1, 2)]
    assert all(s.meta.variants == whole.meta.variants for s in shards)
    merged = merge_reports([ShardReport(source=f"s{i}", report=r) for i, r in enumerate(shards, 1)])
    assert _per_arm(merged) == _per_arm(whole)
    assert merged.uplift is not None
    assert whole.uplift is not None
    assert merged.uplift.arms == whole.uplift.arms
    assert merged.uplift.totals == whole.uplift.totals


def test_a_report_with_arms_reads_back_and_its_trials_have_their_own_files(
    tmp_path: Path,
) -> None:
    """The report round-trips; each arm's transcripts are in their own directories."""
    root = _project(
        tmp_path / "p", [{"name": "bare", "harness": "none"}, {"name": "project"}], trials=1
    )
    report = _run(root)
    run_dir = next((root / ".atlante" / "eval").glob("*/report.json")).parent
    assert load_report(run_dir / "report.json") == report
    paths: Sequence[str | None] = [
        t.transcript
        for arm in ("bare", "project")
        for t in arm_scenarios(report, arm)["needs-agent"].trials
    ]
    assert paths == [
        "trials/needs-agent/0/transcript.jsonl",
        "trials/needs-agent@project/0/transcript.jsonl",
    ]
    document = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    assert document["scenarios"]["needs-agent"]["arms"]["project"]["passRate"] == 1.0


def test_the_terminal_summary_shows_the_arms_by_scenarios_table(tmp_path: Path) -> None:
    """`run` prints each arm's passed/graded per scenario with its uplift verdict."""
    from atlante_eval.views.progress import render_summary

    root = _project(
        tmp_path / "p", [{"name": "bare", "harness": "none", "control": True}, {"name": "project"}]
    )
    report = _run(root)
    text = render_summary(report, root / "report.json", color=False)
    assert "arms x scenarios" in text
    row = next(line for line in text.splitlines() if line.split()[:1] == ["needs-agent"])
    assert row.split() == ["needs-agent", "0/6", "6/6", "+"]
    assert "bare (control)" in text
    overall = next(line for line in text.splitlines() if line.strip().startswith("overall"))
    assert "improved" in overall
