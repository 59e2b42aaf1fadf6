"""JUnit XML: read back with junitparser (a real consumer), counts, outcomes and escaping."""

from __future__ import annotations

from pathlib import Path

import pytest
from factory import make_project, scenario
from junitparser import Error, Failure, JUnitXml, Properties, Skipped, TestCase, TestSuite
from reports import report, write
from standin import StandinHost, actions
from typer.testing import CliRunner, Result

from atlante_eval import CheckResult, RunReport, TrialResult, hosts, junit_xml
from atlante_eval.cli import app
from atlante_eval.report import TrialAttempt
from atlante_eval.views.junit import MAX_BODY_CHARS, MAX_EVIDENCE_CHARS, MAX_MESSAGE_CHARS

FAILED_CHECK = CheckResult(
    index=1,
    type="file-contains",
    verdict="fail",
    evidence={"path": "review.md", "pattern": "missing validation", "found": False},
)


def _every_verdict() -> RunReport:
    trials = [
        TrialResult(i=0, verdict="pass", duration_ms=1500, tokens=900, cost=0.01, checks=[]),
        TrialResult(
            i=1,
            verdict="fail",
            duration_ms=2500,
            tokens=800,
            checks=[
                CheckResult(index=0, type="file-exists", verdict="pass", evidence={}),
                FAILED_CHECK,
            ],
        ),
        TrialResult(i=2, verdict="timeout", duration_ms=600_000, error="timed out after 600000 ms"),
        TrialResult(
            i=3,
            verdict="budget-exceeded",
            duration_ms=4000,
            tokens=500_000,
            error="token budget exceeded: 500000 > 400000",
        ),
        TrialResult(
            i=4,
            verdict="infra-error",
            duration_ms=30,
            error="could not spawn opencode",
            attempts=[TrialAttempt(verdict="infra-error", duration_ms=20, error="ENOSPC")],
        ),
        TrialResult(i=5, verdict="skipped-budget", duration_ms=0),
    ]
    return report(
        {"review": trials, "other": [TrialResult(i=0, verdict="pass", duration_ms=250)]},
        started_at="2026-03-01T02:00:00.000Z",
    )


def _parse(data: bytes) -> JUnitXml:
    return JUnitXml.fromstring(data)


def _suites(xml: JUnitXml) -> dict[str, TestSuite]:
    return {suite.name: suite for suite in xml}


def _cases(suite: TestSuite) -> dict[str, TestCase]:
    return {case.name: case for case in suite}


def _props(element: TestSuite | TestCase) -> dict[str, str]:
    properties = element.child(Properties)  # type: ignore[no-untyped-call]  # junitparser has no annotation here
    return {p.name: p.value for p in properties} if properties is not None else {}


def _invoke(*args: str | Path) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_counts_match_the_verdicts() -> None:
    """Totals and per-suite counts: failures = fail+timeout+budget, errors = infra, skipped."""
    xml = _parse(junit_xml(_every_verdict()))
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (7, 3, 1, 1)
    assert xml.time == pytest.approx(608.28)
    suites = _suites(xml)
    assert list(suites) == ["other", "review"]
    review = suites["review"]
    assert (review.tests, review.failures, review.errors, review.skipped) == (6, 3, 1, 1)
    assert review.time == pytest.approx(608.03)
    assert review.timestamp == "2026-03-01T02:00:00"
    assert len(review) == 6


def test_each_verdict_has_its_element() -> None:
    """pass has no result; fail/timeout/budget-exceeded are typed failures; infra an error."""
    cases = _cases(_suites(_parse(junit_xml(_every_verdict())))["review"])
    assert list(cases) == [f"trial {i}" for i in range(6)]
    assert all(case.classname == "review" for case in cases.values())
    assert cases["trial 0"].is_passed
    assert cases["trial 0"].time == pytest.approx(1.5)
    [fail] = cases["trial 1"].result
    assert isinstance(fail, Failure)
    assert fail.type == "fail"
    assert fail.message == "checks not passed: #1 file-contains (fail)"
    assert '"pattern": "missing validation"' in (fail.text or "")
    assert "file-exists" not in (fail.text or "")  # only the checks that did not pass
    [timeout] = cases["trial 2"].result
    assert isinstance(timeout, Failure)
    assert (timeout.type, timeout.message) == ("timeout", "timed out after 600000 ms")
    [budget] = cases["trial 3"].result
    assert isinstance(budget, Failure)
    assert budget.type == "budget-exceeded"
    [infra] = cases["trial 4"].result
    assert isinstance(infra, Error)
    assert (infra.type, infra.message) == ("infra-error", "could not spawn opencode")
    assert "earlier attempt 1: ENOSPC" in (infra.text or "")
    [skipped] = cases["trial 5"].result
    assert isinstance(skipped, Skipped)
    assert skipped.message == "skipped: the run's session budget was spent"


def test_properties_carry_trial_and_scenario_numbers() -> None:
    """Cases carry verdict, duration, tokens and cost; suites pass rate, interval, stability."""
    suite = _suites(_parse(junit_xml(_every_verdict())))["review"]
    case = _props(_cases(suite)["trial 0"])
    assert case == {"verdict": "pass", "durationMs": "1500", "tokens": "900", "cost": "0.01"}
    props = _props(suite)
    assert props["passRate"] == str(1 / 5)
    assert props["passRateGraded"] == "0.25"
    assert props["graded"] == "4"
    assert props["infraErrors"] == "1"
    assert props["stability"] == "flaky"
    assert 0.0 < float(props["wilson95Lower"]) < 0.25 < float(props["wilson95Upper"]) < 1.0
    assert props["host"] == "opencode"
    assert props["tokens"] == str(900 + 800 + 500_000)


def test_characters_illegal_in_xml_are_replaced() -> None:
    """NUL, escape codes, lone surrogates and U+FFFF in names, evidence and errors still parse."""
    nasty = "a\x00b\x1b[31mc\ud800d\uffffe <&\"'> ok"
    trials = [
        TrialResult(
            i=0,
            verdict="fail",
            duration_ms=1,
            checks=[
                CheckResult(
                    index=0, type="command", verdict="fail", evidence={"stdout": nasty, "n": 1}
                )
            ],
        ),
        TrialResult(i=1, verdict="infra-error", duration_ms=1, error=nasty + "\nsecond line"),
    ]
    suite = next(iter(_parse(junit_xml(report({nasty: trials})))))
    assert suite.name == "a\ufffdb\ufffd[31mc\ufffdd\ufffde <&\"'> ok"
    cases = _cases(suite)
    failure = cases["trial 0"].result[0].text or ""
    assert '"a\\u0000b\\u001b[31mc\ufffdd\ufffde <&' in failure  # JSON escapes controls
    error = cases["trial 1"].result[0]
    assert error.message == "a\ufffdb\ufffd[31mc\ufffdd\ufffde <&\"'> ok second line"
    assert (error.text or "").endswith("ok\nsecond line")


def test_long_evidence_and_messages_are_truncated() -> None:
    """Evidence per check, the body and the message attribute are capped."""
    huge = {"stdout": "x" * 100_000}
    checks = [
        CheckResult(index=n, type="command", verdict="fail", evidence=huge) for n in range(10)
    ]
    trials = [
        TrialResult(i=0, verdict="fail", duration_ms=1, checks=checks),
        TrialResult(i=1, verdict="timeout", duration_ms=1, error="y" * 10_000),
    ]
    cases = _cases(next(iter(_parse(junit_xml(report({"s": trials}))))))
    body = cases["trial 0"].result[0].text or ""
    assert len(body) <= MAX_BODY_CHARS
    first_block = body.split("\n\ncheck #1")[0]
    assert len(first_block) <= MAX_EVIDENCE_CHARS + 100
    assert first_block.endswith("…")
    message = cases["trial 1"].result[0].message or ""
    assert len(message) == MAX_MESSAGE_CHARS
    assert message.endswith("…")


def test_empty_report_is_an_empty_testsuites() -> None:
    """A run with no scenarios gives <testsuites> with zero tests."""
    xml = _parse(junit_xml(report({})))
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (0, 0, 0, 0)
    assert len(xml) == 0


def test_junit_command_prints_or_writes(tmp_path: Path) -> None:
    """junit REPORT prints XML; -o FILE writes it atomically and replaces an old one."""
    run = write(tmp_path / "run", _every_verdict())
    printed = _invoke("junit", run)
    assert printed.exit_code == 0
    assert printed.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites ')
    target = tmp_path / "junit.xml"
    target.write_text("old", encoding="utf-8")
    written = _invoke("junit", run / "report.json", "-o", target)
    assert written.exit_code == 0
    assert written.stdout == ""
    assert target.read_bytes() == printed.stdout_bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml", "run"]


def test_junit_command_refuses_an_unreadable_report(tmp_path: Path) -> None:
    """A missing report is report-unreadable, exit 2."""
    result = _invoke("junit", tmp_path / "nothing")
    assert result.exit_code == 2
    assert result.stderr.startswith("error [report-unreadable]")


def test_run_writes_junit_after_publishing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run --junit FILE writes the published report's JUnit XML; the exit code is the run's."""
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", StandinHost)
    check = [{"type": "file-exists", "path": "out.txt"}]
    root = make_project(
        tmp_path / "p",
        scenarios=[
            scenario("good", prompt=actions({"write": "out.txt", "content": "x"}), checks=check),
            scenario("bad", prompt=actions({"usage": 5}), checks=check),
        ],
    )
    target = tmp_path / "out" / "junit.xml"
    target.parent.mkdir()
    result = _invoke("run", root, "--trials", "2", "--out", tmp_path / "reports", "--junit", target)
    assert result.exit_code == 1  # a trial failed
    xml = _parse(target.read_bytes())
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (4, 2, 0, 0)
    [run_dir] = (tmp_path / "reports").iterdir()
    assert _props(_suites(xml)["good"])["runId"] == run_dir.name


def test_run_reports_an_unwritable_junit_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --junit path in a missing directory is refused before any trial (exit 2)."""
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", StandinHost)
    root = make_project(tmp_path / "p")
    result = _invoke(
        "run", root, "--trials", "1", "--out", tmp_path / "r", "--junit", tmp_path / "x" / "j.xml"
    )
    assert result.exit_code == 2
    assert "error [invalid-output-path]: --junit" in result.stderr
    assert not (tmp_path / "r").exists()  # nothing ran, nothing was published
