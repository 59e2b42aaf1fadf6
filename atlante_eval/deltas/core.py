"""Behaviour deltas of two runs (per common scenario) or of any two sets of trials.

:func:`compare_trial_sets` is the one computation, over a BASE and a HEAD
:class:`~.trials.TrialSet` (two runs' scenario, or two arms of one run);
:func:`behaviour_deltas` applies it to every scenario both reports hold, reading
transcripts from each run directory. Deterministic: no model, no randomness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .._util.paths import display_path
from ..choices import DEFAULT_ALPHA
from ..report import RunReport, TrialResult, load_report, report_path
from ..report.behaviour import BehaviourDeltas, PathStep, ScenarioBehaviour, SideCounts
from ..report.compare import CompareResult, compare_reports
from ..stats import ComparisonVerdict
from ..transcript import TranscriptEntry
from .cause import probable_cause
from .checks import check_deltas
from .effort import effort_deltas
from .paths import MAX_PATH_STEPS, path_delta
from .steps import fold, trial_steps
from .trials import TrialSet
from .usage import trial_usage, usage_deltas

__all__ = ["behaviour_deltas", "compare_trial_sets", "explain_comparison"]


def compare_trial_sets(
    base: TrialSet,
    head: TrialSet,
    *,
    verdict: ComparisonVerdict | None = None,
    alpha: float = DEFAULT_ALPHA,
) -> ScenarioBehaviour:
    """Return the behaviour deltas of HEAD's trials against BASE's.

    Only graded trials are compared (executed minus infra-errors). Usage and paths
    need transcripts on both sides; without them, checks and effort only, with a
    note saying so.

    Args:
        base: The baseline's trials and transcripts.
        head: The trials under test.
        verdict: The pass-rate verdict to explain (a probable cause is given for
            ``regressed`` and ``improved``).
        alpha: Significance level (0 < alpha < 1).

    Raises:
        ValueError: ``alpha`` out of range.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha}")
    old, new = base.graded(), head.graded()
    old_entries = _with_transcripts(old, base.transcripts)
    new_entries = _with_transcripts(new, head.transcripts)
    checks = check_deltas(old, new)
    effort = effort_deltas(old, new, base_transcripts=old_entries, head_transcripts=new_entries)
    notes = _notes(len(old), len(old_entries), len(new), len(new_entries))
    usage = paths = None
    if old_entries and new_entries:
        usage = usage_deltas(
            [trial_usage(e) for e in old_entries.values()],
            [trial_usage(e) for e in new_entries.values()],
            alpha=alpha,
        )
        paths = path_delta(
            _paths(old, old_entries), _paths(new, new_entries), files=(base.files, head.files)
        )
        if (
            paths is not None
            and max(len(paths.base.steps), len(paths.head.steps)) >= MAX_PATH_STEPS
        ):
            notes.append(f"paths longer than {MAX_PATH_STEPS} steps are compared up to there")
    return ScenarioBehaviour(
        verdict=verdict,
        base=SideCounts(graded=len(old), transcripts=len(old_entries)),
        head=SideCounts(graded=len(new), transcripts=len(new_entries)),
        checks=checks,
        usage=usage,
        paths=paths,
        effort=effort,
        probable_cause=probable_cause(
            verdict, usage=usage, paths=paths, effort=effort, checks=checks, alpha=alpha
        ),
        notes=notes,
    )


def _with_transcripts(
    trials: Sequence[TrialResult], transcripts: Mapping[int, Sequence[TranscriptEntry]]
) -> dict[int, Sequence[TranscriptEntry]]:
    return {t.i: transcripts[t.i] for t in trials if t.i in transcripts}


def _paths(
    trials: Sequence[TrialResult], entries: Mapping[int, Sequence[TranscriptEntry]]
) -> list[tuple[TrialResult, list[PathStep]]]:
    return [(t, fold(trial_steps(entries[t.i]))) for t in trials if t.i in entries]


def _notes(base_graded: int, base_read: int, head_graded: int, head_read: int) -> list[str]:
    absent = [
        label
        for label, graded, read in (
            ("BASE", base_graded, base_read),
            ("HEAD", head_graded, head_read),
        )
        if graded and not read
    ]
    if absent:
        return [
            f"transcripts absent from {' and '.join(absent)} (a reference report, a blessed "
            "baseline from the history, or a report without its run directory's trials/): "
            "checks and effort only"
        ]
    return [
        f"{label}: {read} of {graded} graded trials have a transcript; usage and paths use those"
        for label, graded, read in (
            ("BASE", base_graded, base_read),
            ("HEAD", head_graded, head_read),
        )
        if read < graded
    ]


def _side(
    source: RunReport | Path | str, run_dir: Path | str | None
) -> tuple[RunReport, Path | None]:
    if isinstance(source, RunReport):
        return source, Path(run_dir) if run_dir is not None else None
    file = report_path(Path(source))
    return load_report(file), Path(run_dir) if run_dir is not None else file.parent


def behaviour_deltas(
    base: RunReport | Path | str,
    head: RunReport | Path | str,
    *,
    base_dir: Path | str | None = None,
    head_dir: Path | str | None = None,
    comparison: CompareResult | None = None,
    alpha: float | None = None,
) -> BehaviourDeltas:
    """Return the behaviour deltas of every scenario in both runs.

    Args:
        base: The earlier run: its report, or a ``report.json`` or run directory.
        head: The run under test, the same way.
        base_dir: BASE's run directory, where transcripts are read (default: the
            directory of a report given by path; none for a report object).
        head_dir: HEAD's run directory.
        comparison: ``compare_reports`` of the two, for the verdicts and alpha
            (computed with the defaults when not given).
        alpha: Significance level (default: the comparison's, else 0.05).

    Raises:
        DiagnosticError: ``report-unreadable`` for a report path that cannot be read.
        ValueError: ``alpha`` out of range.
    """
    base_report, base_path = _side(base, base_dir)
    head_report, head_path = _side(head, head_dir)
    level = (
        alpha if alpha is not None else comparison.settings.alpha if comparison else DEFAULT_ALPHA
    )
    if comparison is None:
        comparison = compare_reports(base_report, head_report, alpha=level)
    scenarios = {
        name: compare_trial_sets(
            TrialSet.from_run(base_report, name, base_path),
            TrialSet.from_run(head_report, name, head_path),
            verdict=comparison.scenarios[name].verdict if name in comparison.scenarios else None,
            alpha=level,
        )
        for name in sorted(set(base_report.scenarios) & set(head_report.scenarios))
    }
    return BehaviourDeltas(
        alpha=level,
        base_dir=display_path(base_path.absolute()) if base_path is not None else None,
        head_dir=display_path(head_path.absolute()) if head_path is not None else None,
        scenarios=scenarios,
    )


def explain_comparison(
    comparison: CompareResult,
    base: RunReport,
    head: RunReport,
    *,
    base_dir: Path | str | None,
    head_dir: Path | str | None,
) -> CompareResult:
    """Return ``comparison`` with its ``behaviour`` filled in (what ``compare`` prints)."""
    deltas = behaviour_deltas(
        base, head, base_dir=base_dir, head_dir=head_dir, comparison=comparison
    )
    return comparison.model_copy(update={"behaviour": deltas})
