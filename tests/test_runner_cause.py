"""The cause a run-level failure reports, whatever task groups wrapped it."""

from __future__ import annotations

from atlante_eval.run.failures import cause as _cause


def test_a_lone_error_is_named_by_type_and_message() -> None:
    """An error outside any group is reported as ``Type: message``."""
    assert _cause(RuntimeError("sink broke")) == "RuntimeError: sink broke"


def test_the_same_error_raised_by_two_trials_counts_once() -> None:
    """Two concurrent trials raising the same error report it once, not as a group."""
    group = ExceptionGroup(
        "unhandled errors in a TaskGroup",
        [RuntimeError("sink broke"), ExceptionGroup("inner", [RuntimeError("sink broke")])],
    )
    assert _cause(group) == "RuntimeError: sink broke"


def test_distinct_errors_name_the_first_and_count_the_rest() -> None:
    """Different errors in one group name the first and say how many others there were."""
    group = ExceptionGroup("unhandled", [RuntimeError("first"), OSError("second"), KeyError("k")])
    assert _cause(group) == "RuntimeError: first (and 2 other error(s))"
