"""Usage deltas: how often each skill, subagent and tool was used on each side.

Per trial, every skill load, delegation and tool call is counted by name (tools
also by host-neutral kind, when more than one tool of that kind appears: with
one it would repeat the tool's row). Skill and subagent tools (Claude Code's
``Skill``/``Agent``, OpenCode's ``skill``/``task``) count as the skill or
subagent they ran, not again as tools. Each item's per-trial counts are compared
with the two-sided Wilcoxon-Mann-Whitney rank-sum test, exact with ties (for a
0/1 item it tests the share of trials that used it); p-values are Holm-adjusted
over the scenario's items, and the list is ranked by p-value.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..report.behaviour import UsageDelta, UsageItem
from ..stats import holm_adjust
from ..stats.proportions import mean
from ..stats.ranks import rank_sum_test
from ..transcript import SkillEntry, SubagentEntry, ToolCallEntry, TranscriptEntry

__all__ = ["TrialUsage", "trial_usage", "usage_deltas"]

#: Most specific first: on equal p-values a skill is named before a tool kind.
_SPECIFICITY: dict[UsageItem, int] = {"skill": 0, "subagent": 1, "tool": 2, "tool-kind": 3}
_LABEL: dict[UsageItem, str] = {
    "skill": "skill",
    "subagent": "subagent",
    "tool": "tool",
    "tool-kind": "tool kind",
}
_UNIT: dict[UsageItem, str] = {
    "skill": "loads",
    "subagent": "delegations",
    "tool": "calls",
    "tool-kind": "calls",
}


@dataclass(frozen=True, slots=True)
class TrialUsage:
    """What one trial used: counts by item, and which tool names each kind covered."""

    counts: Counter[tuple[UsageItem, str]] = field(default_factory=Counter)
    tools: frozenset[tuple[str, str]] = frozenset()
    """``(kind, name)`` of every tool called."""


def trial_usage(entries: Iterable[TranscriptEntry]) -> TrialUsage:
    """Count one transcript's skill loads, delegations and tool calls."""
    counts: Counter[tuple[UsageItem, str]] = Counter()
    tools: set[tuple[str, str]] = set()
    for entry in entries:
        if isinstance(entry, SkillEntry):
            counts[("skill", entry.name)] += 1
        elif isinstance(entry, SubagentEntry):
            counts[("subagent", entry.name)] += 1
        elif isinstance(entry, ToolCallEntry) and entry.tool_kind not in ("skill", "subagent"):
            counts[("tool", entry.name)] += 1
            counts[("tool-kind", entry.tool_kind)] += 1
            tools.add((entry.tool_kind, entry.name))
    return TrialUsage(counts, frozenset(tools))


def _items(sides: Iterable[Sequence[TrialUsage]]) -> list[tuple[UsageItem, str]]:
    everything = [usage for side in sides for usage in side]
    names_per_kind = Counter(kind for kind, _ in {t for u in everything for t in u.tools})
    keys = {key for usage in everything for key in usage.counts}
    return sorted(key for key in keys if key[0] != "tool-kind" or names_per_kind[key[1]] > 1)


def usage_deltas(
    base: Sequence[TrialUsage], head: Sequence[TrialUsage], *, alpha: float
) -> list[UsageDelta]:
    """Every item either side used, with its test, most significant first."""
    rows: list[UsageDelta] = []
    for item, name in _items((base, head)):
        before = [u.counts[(item, name)] for u in base]
        after = [u.counts[(item, name)] for u in head]
        test = rank_sum_test(before, after)
        rows.append(
            UsageDelta(
                item=item,
                name=name,
                base_used=sum(1 for c in before if c),
                base_trials=len(before),
                head_used=sum(1 for c in after if c),
                head_trials=len(after),
                base_calls=mean(before),
                head_calls=mean(after),
                test="rank-sum-exact" if test.method == "exact" else "rank-sum-normal",
                p_value=test.p_value,
                adjusted_p=test.p_value,
                significant=False,
                summary=_summary(item, name, before, after),
            )
        )
    adjusted = holm_adjust([row.p_value for row in rows]) if rows else []
    rows = [
        row.model_copy(update={"adjusted_p": p, "significant": p < alpha})
        for row, p in zip(rows, adjusted, strict=True)
    ]
    return sorted(rows, key=_rank)


def _rank(row: UsageDelta) -> tuple[float, float, int, str, str]:
    largest = max(row.base_calls, row.head_calls)
    change = abs(row.head_calls - row.base_calls) / largest if largest else 0.0
    return (row.p_value, -change, _SPECIFICITY[row.item], row.item, row.name)


def _summary(item: UsageItem, name: str, before: Sequence[int], after: Sequence[int]) -> str:
    """``skill x: used 6/6 → 1/6`` or ``tool Bash: 2.0 → 7.5 calls per trial``."""
    used = (sum(1 for c in before if c), sum(1 for c in after if c))
    shares = f"{used[0]}/{len(before)} → {used[1]}/{len(after)}"
    label = f"{_LABEL[item]} {name}"
    if max([*before, *after], default=0) <= 1:
        if used[1] == 0 and used[0]:
            return f"{label}: no longer used ({shares})"
        if used[0] == 0 and used[1]:
            return f"{label}: newly used ({shares})"
        return f"{label}: used {shares}"
    calls = f"{mean(before):.1f} → {mean(after):.1f} {_UNIT[item]} per trial"
    same_share = used[0] * len(after) == used[1] * len(before)
    return f"{label}: {calls}" + ("" if same_share else f" (used {shares})")
