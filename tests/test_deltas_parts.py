"""Each kind of behaviour delta on hand-made trials: usage rows, checks, typical paths, effort."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from atlante_eval import CheckResult, TrialResult, TrialSet, compare_trial_sets
from atlante_eval.deltas.paths import typical_path
from atlante_eval.deltas.steps import fold, step_label, trial_steps
from atlante_eval.report.behaviour import BehaviourDeltas
from atlante_eval.transcript import (
    HeaderEntry,
    ResultEntry,
    SkillEntry,
    SubagentEntry,
    ToolCallEntry,
    TranscriptEntry,
)
from atlante_eval.views.deltas_render import deltas_markdown, deltas_text


def _calls(*names: str) -> list[TranscriptEntry]:
    """A transcript: ``kind:Name`` tool calls, ``skill:x`` loads, ``agent:x`` delegations."""
    entries: list[TranscriptEntry] = [HeaderEntry(host="claude-code", scenario="s", trial=0)]
    for t, spec in enumerate(names, start=1):
        kind, name = spec.split(":")
        if kind == "skill":
            entries.append(SkillEntry(t=t, name=name))
        elif kind == "agent":
            entries.append(SubagentEntry(t=t, name=name, call_id=f"a{t}"))
            entries.append(ToolCallEntry(t=t, id=f"a{t}", name="Agent", tool_kind="subagent"))
        else:
            entries.append(ToolCallEntry(t=t, id=f"c{t}", name=name, tool_kind=kind))  # type: ignore[arg-type]
    entries.append(ResultEntry(t=99, status="success", turns=len(names)))
    return entries


def _side(
    sessions: Sequence[list[TranscriptEntry] | None],
    *,
    verdicts: Sequence[str] | None = None,
    failing: Sequence[int] = (),
) -> TrialSet:
    trials = []
    for i in range(len(sessions)):
        verdict = verdicts[i] if verdicts else "pass"
        check = CheckResult(
            index=1, type="file-contains", verdict="fail" if i in failing else "pass", evidence={}
        )
        trials.append(
            TrialResult(i=i, verdict=verdict, duration_ms=1000 * (i + 1), checks=[check])  # type: ignore[arg-type]
        )
    return TrialSet(trials, {i: s for i, s in enumerate(sessions) if s is not None})


def test_a_kind_gets_its_own_row_only_when_several_tools_share_it() -> None:
    """Read and Glob are two kinds of one tool each: no kind rows; Grep and Glob share search."""
    one_each = compare_trial_sets(
        _side([_calls("read:Read", "search:Glob")] * 3), _side([_calls("read:Read")] * 3)
    )
    assert one_each.usage is not None
    assert {(u.item, u.name) for u in one_each.usage} == {("tool", "Read"), ("tool", "Glob")}
    shared = compare_trial_sets(
        _side([_calls("search:Grep", "search:Glob")] * 3), _side([_calls("search:Grep")] * 3)
    )
    assert shared.usage is not None
    kind = next(u for u in shared.usage if u.item == "tool-kind")
    assert (kind.name, kind.base_calls, kind.head_calls) == ("search", 2.0, 1.0)


def test_skill_and_subagent_tools_count_as_what_they_ran() -> None:
    """Claude Code's Agent call is the delegation, not also a tool row."""
    deltas = compare_trial_sets(
        _side([_calls("agent:qa", "shell:Bash")] * 4), _side([_calls("shell:Bash")] * 4)
    )
    assert deltas.usage is not None
    assert [(u.item, u.name) for u in deltas.usage] == [("subagent", "qa"), ("tool", "Bash")]
    assert deltas.usage[0].summary == "subagent qa: no longer used (4/4 → 0/4)"


def test_summaries_say_newly_used_and_uses_per_trial() -> None:
    """A new skill is ``newly used``; a skill loaded twice per trial shows loads per trial."""
    deltas = compare_trial_sets(
        _side([_calls("skill:a", "skill:a")] * 3), _side([_calls("skill:a", "skill:b")] * 3)
    )
    assert deltas.usage is not None
    summaries = {u.name: u.summary for u in deltas.usage}
    assert summaries["b"] == "skill b: newly used (0/3 → 3/3)"
    assert summaries["a"] == "skill a: 2.0 → 1.0 loads per trial"


def test_usage_p_values_are_holm_adjusted_within_the_scenario() -> None:
    """Two items with the same raw p-value: the smaller is multiplied by 2, the next by 1."""
    deltas = compare_trial_sets(
        _side([_calls("skill:a", "shell:Bash")] * 6), _side([_calls("read:Read")] * 6)
    )
    assert deltas.usage is not None
    raw = deltas.usage[0].p_value
    assert [u.adjusted_p for u in deltas.usage] == pytest.approx([3 * raw, 3 * raw, 3 * raw])
    assert all(u.significant for u in deltas.usage)


@pytest.mark.parametrize(
    ("base_failing", "head_failing", "change", "summary"),
    [
        ((), (0, 1), "started-failing", "check 1 file-contains now fails 2/4 (BASE 0/4)"),
        (
            (0, 1),
            (),
            "stopped-failing",
            "check 1 file-contains no longer fails (BASE 2/4, HEAD 0/4)",
        ),
        ((0,), (0, 1, 2), "fails-more", "check 1 file-contains fails more: 1/4 → 3/4"),
        ((0, 1, 2), (0,), "fails-less", "check 1 file-contains fails less: 3/4 → 1/4"),
        ((0,), (1,), "same", "check 1 file-contains fails: 1/4 → 1/4"),
    ],
)
def test_check_changes(
    base_failing: tuple[int, ...], head_failing: tuple[int, ...], change: str, summary: str
) -> None:
    """Each way a check's failures can move, and checks that never failed are left out."""
    deltas = compare_trial_sets(
        _side([None] * 4, failing=base_failing), _side([None] * 4, failing=head_failing)
    )
    [check] = deltas.checks
    assert (check.change, check.summary) == (change, summary)


def test_infra_errors_are_not_compared() -> None:
    """Only graded trials count: an infra-error trial's transcript is left out."""
    head = _side(
        [_calls("shell:Bash")] * 3 + [_calls("skill:x")], verdicts=["pass"] * 3 + ["infra-error"]
    )
    deltas = compare_trial_sets(_side([_calls("shell:Bash")] * 3), head)
    assert deltas.head.graded == 3
    assert deltas.usage is not None
    assert {u.name for u in deltas.usage} == {"Bash"}


def test_the_typical_path_is_the_most_common_else_the_medoid() -> None:
    """Two trials share a path: it wins; all different: the one closest to the others."""
    paths = {
        0: _calls("read:Read", "shell:Bash"),
        1: _calls("search:Grep", "shell:Bash", "write:Edit"),
        2: _calls("search:Grep", "shell:Bash", "write:Edit"),
    }
    trials = _side(list(paths.values())).trials
    common = typical_path([(t, fold(trial_steps(paths[t.i]))) for t in trials])
    assert (common.chosen_by, common.followed, [e.i for e in common.examples]) == (
        "most-common",
        2,
        [1, 2],
    )
    varied = {
        0: _calls("read:Read", "shell:Bash", "write:Edit", "shell:Bash"),
        1: _calls("read:Read", "shell:Bash", "write:Edit"),
        2: _calls("search:Grep", "shell:Bash", "write:Edit"),
    }
    trials = _side(list(varied.values())).trials
    medoid = typical_path([(t, fold(trial_steps(varied[t.i]))) for t in trials])
    assert medoid.chosen_by == "medoid"
    assert [step_label(s) for s in medoid.steps] == ["read Read", "shell Bash", "write Edit"]


def test_a_reordering_is_named_by_the_paths_when_no_usage_differs() -> None:
    """The same calls in another order: no usage delta, so the cause names the divergence."""
    deltas = compare_trial_sets(
        _side([_calls("read:Read", "shell:Bash")] * 6, failing=()),
        _side([_calls("shell:Bash", "read:Read")] * 6, failing=range(6)),
        verdict="regressed",
    )
    assert deltas.usage is not None
    assert all(u.p_value == 1.0 for u in deltas.usage)
    assert deltas.probable_cause == (
        "regressed: typical path diverges at step 1: read Read dropped "
        "(6/6 → 0/6 follow BASE's path); check 1 file-contains now fails 6/6 (BASE 0/6)"
    )


def test_effort_leaves_out_metrics_nobody_recorded() -> None:
    """No tokens or cost anywhere: turns and duration only, with their differences."""
    deltas = compare_trial_sets(
        _side([_calls("shell:Bash")] * 3), _side([_calls("shell:Bash", "shell:Bash")] * 3)
    )
    assert [e.metric for e in deltas.effort] == ["turns", "durationMs"]
    turns = deltas.effort[0]
    assert (turns.base_mean, turns.head_mean, turns.difference, turns.relative) == (1, 2, 1, 1)


def test_untrusted_names_are_escaped_in_the_terminal_and_in_markdown() -> None:
    """A skill named with a terminal escape and HTML prints as text."""
    evil = "x\x1b[31m<b>|`"
    behaviour = compare_trial_sets(
        _side([_calls(f"skill:{evil}")] * 4), _side([_calls("shell:Bash")] * 4), verdict="regressed"
    )
    deltas = BehaviourDeltas(alpha=0.05, base_dir=None, head_dir=None, scenarios={"s": behaviour})
    text = "\n".join(deltas_text(deltas))
    assert "\x1b" not in text
    assert "x\\x1b[31m<b>|`" in text
    markdown = "\n".join(deltas_markdown(deltas))
    assert "\x1b" not in markdown
    cause = next(line for line in markdown.splitlines() if "probable cause" in line)
    assert "x\\x1b[31m&lt;b>\\|'" in cause  # prose: no tag, no cell break, no code span
    assert "| `skill x\\x1b[31m<b>\\|'` |" in markdown  # inside a code span, a tag is text


def test_alpha_must_be_a_probability() -> None:
    """An alpha outside (0, 1) is refused."""
    with pytest.raises(ValueError, match="alpha"):
        compare_trial_sets(_side([None]), _side([None]), alpha=1.0)
