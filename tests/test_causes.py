"""One-line causes of non-pass trials, per-check failure counts and the not-graded notes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, get_args

import pytest

from atlante_eval import CheckResult, TrialResult
from atlante_eval._util.terminal import printable, shorten
from atlante_eval.checks import CHECK_KINDS
from atlante_eval.choices import CheckType
from atlante_eval.report import MetaConfig, summarize
from atlante_eval.views.causes import (
    CAUSE_WIDTH,
    check_failures,
    evidence_line,
    no_graded_note,
    trial_cause,
)

CONFIG = MetaConfig(
    trials=3,
    timeout_ms=600_000,
    max_sessions=5,
    max_tokens=400_000,
    setup_timeout_ms=120_000,
    check_timeout_default_ms=120_000,
)


def check(index: int, kind: str, verdict: str = "fail", **evidence: Any) -> CheckResult:
    return CheckResult(index=index, type=kind, verdict=verdict, evidence=evidence)  # type: ignore[arg-type]


def trial(verdict: str, i: int = 0, **fields: Any) -> TrialResult:
    return TrialResult(i=i, verdict=verdict, duration_ms=5, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("result", "cause"),
    [
        (trial("pass"), None),
        (
            trial("timeout", timeout_ms=600_000, error="trial exceeded 600000ms"),
            "timeout after 600000 ms",
        ),
        (trial("timeout", error="trial exceeded 5ms"), "trial exceeded 5ms"),
        (
            trial("budget-exceeded", tokens=412_031, error="x"),
            "budget-exceeded: 412,031 tokens > maxTokens 400,000",
        ),
        (
            trial("infra-error", error="\n  host opencode failed: 401 bad key\nmore detail"),
            "host opencode failed: 401 bad key",
        ),
        (trial("infra-error"), "no error recorded"),
        (trial("skipped-budget"), "maxSessions 5 reached: the trial did not start"),
    ],
)
def test_trial_cause_names_the_limit_or_error(result: TrialResult, cause: str | None) -> None:
    """Timeouts and budgets name their limit; infra-errors their error's first line."""
    assert trial_cause(result, CONFIG) == cause


def test_fail_cause_names_checks_by_index_type_and_first_evidence_line() -> None:
    """A fail names its first two failing checks with evidence and counts the rest."""
    result = trial(
        "fail",
        checks=[
            check(0, "file-exists", "pass"),
            check(1, "command", run=["t"], exit=1, expectExit=0, output="\n2 failed\n1 passed"),
            check(2, "file-contains", path="a.ts", pattern="export"),
            check(3, "file-absent", path="tmp.log"),
        ],
    )
    assert trial_cause(result, CONFIG) == (
        "check 1 command: exit 1, expected 0: error line: 2 failed; "
        'check 2 file-contains: a.ts does not contain "export" (+1 more failing)'
    )


@pytest.mark.parametrize(
    ("result", "line"),
    [
        (check(0, "file-exists", path="README.md", exists=False), "README.md does not exist"),
        (check(0, "file-absent", path="x", exists=True), "x exists"),
        (check(0, "file-contains", path="a", exists=False), "a does not exist"),
        (check(0, "file-contains", path="a", exists=True), "a is not a regular file"),
        (
            check(0, "file-contains", path="a", pattern="x+", regex=True),
            'a does not match "x+"',
        ),
        (check(0, "file-unchanged", path="a", currentHash="1"), "a changed"),
        (check(0, "file-unchanged", path="a", currentHash=None), "a was removed"),
        (
            check(0, "diff-allowlist", unexpected=["a", "b", "c", "d"]),
            "unexpected changes: a, b, c (+1 more)",
        ),
        (check(0, "command", run=["x"], timedOut=True, output=""), "timed out"),
        (check(0, "command", run=["x"], exit=None, expectExit=0), "killed by a signal, expected 0"),
        (
            check(0, "command", exit=0, expectExit=0, outputMatches=r"\d pass", output="ok"),
            r'output does not match "\\d pass": ok',
        ),
        (
            check(0, "command", "error", run=["x"], cause="spawn failed: ENOENT"),
            "spawn failed: ENOENT",
        ),
    ],
)
def test_evidence_line_per_check_type(result: CheckResult, line: str) -> None:
    """Each check type's evidence reads as one line."""
    assert evidence_line(result) == line


def test_every_check_type_is_worded_by_its_registry_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The failure line comes from the type's CHECK_KINDS entry; an unknown type shows JSON."""

    def line_of(name: str) -> Callable[[Mapping[str, Any]], str]:
        return lambda _evidence: f"line of {name}"

    for name, kind in list(CHECK_KINDS.items()):
        monkeypatch.setitem(CHECK_KINDS, name, dataclasses.replace(kind, line=line_of(name)))
    for name in get_args(CheckType):
        assert evidence_line(check(0, name, path="a")) == f"line of {name}"
    assert evidence_line(check(0, "future-check", path="a", n=1)) == '{"path": "a", "n": 1}'
    assert evidence_line(check(0, "file-exists", cause="boom\nmore")) == "boom"


def test_untrusted_text_is_escaped_and_shortened() -> None:
    """An ANSI escape in evidence or an error is shown as text, never sent raw."""
    evil = check(0, "command", exit=1, expectExit=0, output="\x1b[2J\x1b]0;owned\x07" + "y" * 500)
    line = evidence_line(evil)
    assert "\x1b" not in line
    assert "\x07" not in line
    assert line.startswith("exit 1, expected 0: \\x1b[2J\\x1b]0;owned\\x07yyy")
    assert line.endswith("…")
    assert len(line) == 100
    cause = trial_cause(trial("infra-error", error="\x9b31m\u202eevil" + "z" * 900), CONFIG)
    assert cause is not None
    assert cause.startswith("\\x9b31m\\u202eevil")
    assert len(cause) == CAUSE_WIDTH
    assert printable("a\tb\nc", multiline=True) == "a\tb\nc"
    assert printable("a\tb\r\nc") == "a b c"
    assert shorten("abc", 3) == "abc"
    assert shorten("abcd", 3) == "ab…"


def test_check_failures_count_each_check_over_the_trials_that_ran_checks() -> None:
    """Failing checks are counted per check over the graded trials, in check order."""
    result = summarize(
        [
            trial("fail", 0, checks=[check(0, "command"), check(2, "file-contains")]),
            trial("fail", 1, checks=[check(0, "command", "pass"), check(2, "file-contains")]),
            trial("infra-error", 2, checks=[check(0, "command", "error", cause="x")]),
            trial("timeout", 3),
        ]
    )
    assert [f.describe() for f in check_failures(result)] == [
        "check 0 command failed 1/3, errored 1/3",
        "check 2 file-contains failed 2/3",
    ]


@pytest.mark.parametrize(
    ("verdicts", "note"),
    [
        (["skipped-budget"] * 3, "not run (3 skipped-budget)"),
        (["infra-error"] * 3, "no graded trials (3 infra-error)"),
        (["infra-error", "skipped-budget"], "no graded trials (1 infra-error, 1 skipped-budget)"),
        (["infra-error", "fail"], None),
        (["pass"], None),
        ([], None),
    ],
)
def test_no_graded_note(verdicts: list[str], note: str | None) -> None:
    """Scenarios with no graded trial say why instead of showing pass 0%."""
    result = summarize([trial(v, i) for i, v in enumerate(verdicts)])
    assert no_graded_note(result) == note
