"""Action paths and their alignment on hand-made sequences: edits, nesting, host orderings."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from atlante_eval.deltas import align, edit_distance, first_divergence, fold, step_label
from atlante_eval.deltas.align import alignment_ops
from atlante_eval.deltas.steps import trial_steps
from atlante_eval.report.behaviour import PathStep
from atlante_eval.transcript import (
    HeaderEntry,
    SkillEntry,
    SubagentEntry,
    TextEntry,
    ToolCallEntry,
    TranscriptEntry,
)


def _levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        above, row[0] = row[:], i
        for j in range(1, len(b) + 1):
            row[j] = min(above[j - 1] + (a[i - 1] != b[j - 1]), above[j] + 1, row[j - 1] + 1)
    return row[len(b)]


def _fewest_substitutions(a: Sequence[str], b: Sequence[str]) -> int:
    """Substitutions of the alignments with the fewest edits, at their fewest."""
    row = [(j, 0) for j in range(len(b) + 1)]
    for i in range(1, len(a) + 1):
        above, row[0] = row[:], (i, 0)
        for j in range(1, len(b) + 1):
            diagonal = above[j - 1]
            if a[i - 1] != b[j - 1]:
                diagonal = (diagonal[0] + 1, diagonal[1] + 1)
            row[j] = min(
                diagonal, (above[j][0] + 1, above[j][1]), (row[j - 1][0] + 1, row[j - 1][1])
            )
    return row[len(b)][1]


def _steps(*labels: str) -> list[PathStep]:
    """Steps from ``kind name`` labels; ``qa>kind name`` is inside subagent qa."""
    steps = []
    for label in labels:
        agent, _, rest = label.rpartition(">")
        kind, name = rest.split(" ")
        depth = len(agent.split("/")) if agent else 0
        steps.append(PathStep(kind=kind, name=name, depth=depth, agent=agent or None))
    return steps


def _ops(base: list[PathStep], head: list[PathStep]) -> list[tuple[str, str, str]]:
    return [
        (
            row.op,
            step_label(row.base) if row.base else "",
            step_label(row.head) if row.head else "",
        )
        for row in align(base, head)
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from("abcd"), max_size=70), st.lists(st.sampled_from("abcd"), max_size=70)
)
def test_bit_parallel_distance_and_alignment_agree_with_the_textbook_table(
    a: list[str], b: list[str]
) -> None:
    """Distance equals the Levenshtein table; the alignment costs it and keeps steps in order."""
    expected = _levenshtein(a, b)
    assert edit_distance(a, b) == expected
    ops = alignment_ops(a, b, lambda item: item)
    assert sum(op != "same" for op, _, _ in ops) == expected
    assert sum(op == "changed" for op, _, _ in ops) == _fewest_substitutions(a, b)
    assert [a[i] for _, i, _ in ops if i is not None] == a
    assert [b[j] for _, _, j in ops if j is not None] == b
    assert all(
        (a[i] == b[j]) == (op == "same") for op, i, j in ops if i is not None and j is not None
    )


def test_an_insertion_is_added_and_the_divergence_is_there() -> None:
    """HEAD runs one extra command in the middle."""
    rows = align(_steps("read Read", "write Edit"), _steps("read Read", "shell Bash", "write Edit"))
    assert [r.op for r in rows] == ["same", "added", "same"]
    assert first_divergence(rows) == 1
    assert rows[1].head is not None
    assert rows[1].head.name == "Bash"


def test_a_deletion_is_removed() -> None:
    """HEAD no longer loads the skill."""
    ops = _ops(_steps("skill api", "shell Bash", "write Edit"), _steps("shell Bash", "write Edit"))
    assert ops == [
        ("removed", "skill api", ""),
        ("same", "shell Bash", "shell Bash"),
        ("same", "write Edit", "write Edit"),
    ]


def test_a_substitution_is_changed() -> None:
    """HEAD searches where BASE read."""
    ops = _ops(_steps("read Read", "shell Bash"), _steps("search Grep", "shell Bash"))
    assert ops == [("changed", "read Read", "search Grep"), ("same", "shell Bash", "shell Bash")]


def test_a_replaced_first_step_stays_one_substitution_whichever_side_is_longer() -> None:
    """A dropped skill and more shell calls: the skill is replaced, the extra calls added."""
    short = _steps("skill api", "shell Bash", "shell Bash", "write Edit")
    long = _steps(*["shell Bash"] * 7, "write Edit")
    forward = [r.op for r in align(short, long)]
    assert forward == ["changed", "same", "same", *["added"] * 4, "same"]
    assert [r.op for r in align(long, short)] == [
        "changed",
        "same",
        "same",
        *["removed"] * 4,
        "same",
    ]


def test_equal_paths_have_no_divergence() -> None:
    """Identical paths align step for step."""
    rows = align(_steps("read Read", "shell Bash"), _steps("read Read", "shell Bash"))
    assert [r.op for r in rows] == ["same", "same"]
    assert first_divergence(rows) is None


def test_a_common_beginning_stays_aligned_before_the_first_difference() -> None:
    """With several cheapest alignments, the one that agrees longest from the start is chosen."""
    ops = _ops(_steps("read Read", "shell Bash"), _steps("read Read", "shell Bash", "shell Bash"))
    assert ops[:2] == [("same", "read Read", "read Read"), ("same", "shell Bash", "shell Bash")]
    assert ops[2] == ("added", "", "shell Bash")


def test_a_subagents_steps_only_match_inside_the_same_subagent() -> None:
    """BASE's subagent ran a shell command; HEAD's ran none but the main agent did."""
    base = _steps("subagent qa", "qa>read Read", "qa>shell Bash", "write Edit")
    head = _steps("subagent qa", "qa>read Read", "write Edit", "shell Bash")
    rows = align(base, head)
    assert [r.op for r in rows] == ["same", "same", "removed", "same", "added"]
    removed, added = rows[2].base, rows[4].head
    assert removed is not None
    assert (removed.agent, removed.depth) == ("qa", 1)
    assert added is not None
    assert (added.agent, added.depth) == (None, 0)


def _claude_session() -> list[TranscriptEntry]:
    """Claude Code's order: a call is written when its result arrives, stamped with its start."""
    return [
        HeaderEntry(host="claude-code", scenario="s", trial=0),
        SkillEntry(t=5, name="api-conventions"),
        ToolCallEntry(t=5, id="k", name="Skill", tool_kind="skill"),
        SubagentEntry(t=10, name="qa", call_id="task"),
        SubagentEntry(t=12, name="linter", call_id="inner", parent="task"),
        ToolCallEntry(t=13, id="n1", name="Bash", tool_kind="shell", parent="inner"),
        ToolCallEntry(t=12, id="inner", name="Agent", tool_kind="subagent", parent="task"),
        ToolCallEntry(t=11, id="n0", name="Read", tool_kind="read", parent="task"),
        ToolCallEntry(t=10, id="task", name="Agent", tool_kind="subagent"),
        TextEntry(t=30, text="done"),
        ToolCallEntry(t=31, id="w", name="Write", tool_kind="write", input={"file_path": "a.py"}),
    ]


def test_steps_follow_call_start_with_subagents_nested_and_tools_not_doubled() -> None:
    """Skill and Agent tool calls are not repeated; nested calls follow their delegation."""
    steps = trial_steps(_claude_session())
    assert [(s.depth, s.agent, step_label(s)) for s in steps] == [
        (0, None, "skill api-conventions"),
        (0, None, "subagent qa"),
        (1, "qa", "read Read"),
        (1, "qa", "subagent linter"),
        (2, "qa/linter", "shell Bash"),
        (0, None, "write Write"),
    ]
    assert steps[-1].detail == "a.py"


def test_a_delegation_written_after_its_subagents_calls_still_comes_first() -> None:
    """OpenCode writes a task call when it ends: its subagent's calls are still nested after it."""
    entries: list[TranscriptEntry] = [
        HeaderEntry(host="opencode", scenario="s", trial=0),
        ToolCallEntry(t=3, id="c1", name="read", tool_kind="read", parent="task1"),
        ToolCallEntry(t=4, id="c2", name="bash", tool_kind="shell", parent="task1"),
        SubagentEntry(t=9, name="general", call_id="task1"),
        ToolCallEntry(t=9, id="task1", name="task", tool_kind="subagent"),
        ToolCallEntry(t=10, id="c3", name="write", tool_kind="write"),
    ]
    assert [(s.depth, step_label(s)) for s in trial_steps(entries)] == [
        (0, "subagent general"),
        (1, "read read"),
        (1, "shell bash"),
        (0, "write write"),
    ]


def test_calls_of_an_unknown_subagent_hang_under_an_unknown_step() -> None:
    """A parent that no delegation names gets an ``(unknown)`` subagent step where it starts."""
    entries: list[TranscriptEntry] = [
        HeaderEntry(host="opencode", scenario="s", trial=0),
        ToolCallEntry(t=1, id="a", name="bash", tool_kind="shell"),
        ToolCallEntry(t=2, id="b", name="read", tool_kind="read", parent="session:ses_x"),
        ToolCallEntry(t=3, id="c", name="write", tool_kind="write"),
    ]
    assert [(s.depth, step_label(s)) for s in trial_steps(entries)] == [
        (0, "shell bash"),
        (0, "subagent (unknown)"),
        (1, "read read"),
        (0, "write write"),
    ]


def test_fold_merges_consecutive_repeats_only() -> None:
    """Three Bash calls in a row fold into one step of count 3; a repeat elsewhere does not."""
    folded = fold(_steps("shell Bash", "shell Bash", "shell Bash", "read Read", "shell Bash"))
    assert [step_label(s) for s in folded] == ["shell Bash x3", "read Read", "shell Bash"]
    nested = fold(_steps("subagent qa", "qa>shell Bash", "shell Bash"))
    assert [s.count for s in nested] == [1, 1, 1]
