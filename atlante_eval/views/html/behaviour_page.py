"""The comparison page's "why" sections as data: one per changed scenario.

Each holds the scenario's probable cause, its usage, check and effort deltas, the
two typical paths aligned with the first divergence marked, and links to example
trials' transcripts from each side (relative to where the page is written, or
absolute ``file://`` addresses). Every text is as recorded: the template escapes it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from ...deltas import CAUSE_LABEL, effort_summary, step_label
from ...report.behaviour import (
    AlignedStep,
    BehaviourDeltas,
    EffortDelta,
    ScenarioBehaviour,
    TrialRef,
)
from ..deltas_render import shown_scenarios

__all__ = ["BehaviourSection", "ExampleLink", "PathRow", "behaviour_sections"]


@dataclass(frozen=True, slots=True)
class ExampleLink:
    """An example trial, linked to its transcript when there is one."""

    label: str
    href: str | None
    verdict: str


@dataclass(frozen=True, slots=True)
class PathRow:
    """One aligned row of the two typical paths."""

    number: int
    op: str
    base: str
    head: str
    base_depth: int
    head_depth: int
    divergence: bool


@dataclass(frozen=True, slots=True)
class BehaviourSection:
    """One changed scenario's deltas."""

    name: str
    anchor: str
    behaviour: ScenarioBehaviour
    path_rows: list[PathRow]
    base_examples: list[ExampleLink]
    head_examples: list[ExampleLink]
    effort: list[tuple[EffortDelta, str]]
    cause_label: str


def _href(run_dir: Path | None, ref: TrialRef, links_from: Path | None) -> str | None:
    if run_dir is None or ref.transcript is None:
        return None
    target = run_dir / ref.transcript
    if links_from is None:
        return target.absolute().as_uri()
    return quote(os.path.relpath(target, links_from))


def _examples(
    refs: list[TrialRef], run_dir: Path | None, links_from: Path | None
) -> list[ExampleLink]:
    return [
        ExampleLink(f"trial {ref.i}", _href(run_dir, ref, links_from), ref.verdict) for ref in refs
    ]


def _step(row: AlignedStep, side: str) -> tuple[str, int]:
    step = row.base if side == "base" else row.head
    if step is None:
        return "", 0
    detail = f": {step.detail}" if step.detail and step.count == 1 else ""
    status = f" [{step.status}]" if step.status else ""
    return step_label(step) + status + detail, step.depth


def _rows(behaviour: ScenarioBehaviour) -> list[PathRow]:
    paths = behaviour.paths
    if paths is None:
        return []
    rows = []
    for number, row in enumerate(paths.alignment):
        base, base_depth = _step(row, "base")
        head, head_depth = _step(row, "head")
        rows.append(
            PathRow(
                number=number + 1,
                op=row.op,
                base=base,
                head=head,
                base_depth=base_depth,
                head_depth=head_depth,
                divergence=number == paths.first_divergence,
            )
        )
    return rows


def behaviour_sections(
    deltas: BehaviourDeltas | None,
    *,
    links_from: Path | None,
    run_dirs: tuple[Path | None, Path | None] = (None, None),
) -> list[BehaviourSection]:
    """The sections of the scenarios worth explaining (regressions first).

    ``run_dirs`` are the runs' directories as paths, when known; else those
    ``deltas`` names are used.
    """
    if deltas is None:
        return []
    base_dir = run_dirs[0] or (Path(deltas.base_dir) if deltas.base_dir else None)
    head_dir = run_dirs[1] or (Path(deltas.head_dir) if deltas.head_dir else None)
    sections = []
    for index, (name, behaviour) in enumerate(shown_scenarios(deltas)):
        paths = behaviour.paths
        sections.append(
            BehaviourSection(
                name=name,
                anchor=f"why-{index}",
                behaviour=behaviour,
                path_rows=_rows(behaviour),
                base_examples=_examples(paths.base.examples, base_dir, links_from) if paths else [],
                head_examples=_examples(paths.head.examples, head_dir, links_from) if paths else [],
                effort=[(row, effort_summary(row)) for row in behaviour.effort],
                cause_label=CAUSE_LABEL,
            )
        )
    return sections
