"""Run options: one validated model for everything a run can be asked to do."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..choices import DEFAULT_ALPHA, DEFAULT_JOBS, DEFAULT_MARGIN, ShardBalancing
from ..diagnostics import Diagnostic, DiagnosticError, error
from ..project import parse_trials

__all__ = [
    "DEFAULT_JOBS",
    "MAX_RETRY_INFRA",
    "RunOptions",
    "Shard",
    "adaptive_problems",
    "balance_problems",
    "parse_shard",
    "run_options",
]

#: Most retries ``--retry-infra`` allows per trial.
MAX_RETRY_INFRA = 10


class Shard(BaseModel):
    """``I/N``: the I-th (1-based) of N slices of the trial plan."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: Annotated[int, Field(ge=1)]
    """1-based slice number."""
    count: Annotated[int, Field(ge=1)]
    """Number of slices."""

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, position: int) -> bool:
        """Whether plan position ``position`` belongs to this slice (round robin)."""
        return position % self.count == self.index - 1


class RunOptions(BaseModel):
    """Everything a run can be asked to do beyond the project's configuration."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenarios: tuple[str, ...] = ()
    """Scenario names or glob patterns to run (empty: all)."""
    trials: Annotated[int, Field(ge=1, le=50)] | None = None
    """Trials per scenario, overriding ``eval.budget.trials``."""
    jobs: Annotated[int, Field(ge=1)] = DEFAULT_JOBS
    """Trials run at once."""
    out: Path | None = None
    """Report base directory instead of ``<project>/.atlante/eval``."""
    keep: bool = False
    """Keep trial sandboxes."""
    pass_env: tuple[str, ...] = ()
    """Parent environment variables handed to the host session."""
    retry_infra: Annotated[int, Field(ge=0, le=MAX_RETRY_INFRA)] = 0
    """Reruns of a trial while it ends in infra-error."""
    resume: Path | None = None
    """Run directory of an earlier run whose matching trials are reused."""
    shard: Shard | None = None
    """Run only this slice of the plan."""
    balance: ShardBalancing = "round-robin"
    """How ``shard`` slices the plan: round robin, or by the durations of ``balance_from``."""
    balance_from: Path | None = None
    """Earlier report (or its run directory) whose trial durations balance the shards."""
    last_failed: bool = False
    """Run only the scenarios that did not fully pass in the previous report."""
    against: Path | None = None
    """BASE report (or its run directory) an adaptive run compares with."""
    until_decided: bool = False
    """Add trials to undecided scenarios until the comparison with ``against`` is decided."""
    min_trials: Annotated[int, Field(ge=1, le=50)] | None = None
    """Trials per scenario at the first look (default: the configured trials)."""
    max_trials: Annotated[int, Field(ge=1, le=50)] | None = None
    """Most trials per scenario in an adaptive run (default 50)."""
    max_cost: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    """Stop adding waves once the host-reported cost reaches this many USD."""
    alpha: Annotated[float, Field(gt=0, lt=1)] = DEFAULT_ALPHA
    """Adaptive runs: error rate over all looks."""
    margin: Annotated[float, Field(gt=0, le=1)] = DEFAULT_MARGIN
    """Adaptive runs: largest change counted as unchanged."""
    html: bool = True
    """Write ``report.html`` beside ``report.json`` (``--no-html`` turns it off)."""
    isolation: Literal["none", "os"] | None = None
    """How trials are contained, overriding ``eval.isolation`` (docs/isolation.md)."""


def parse_shard(raw: str | Shard | None) -> Shard | None:
    """Parse ``I/N`` (1 <= I <= N).

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2).
    """
    if raw is None or isinstance(raw, Shard):
        return raw
    parts = raw.strip().split("/")
    if len(parts) == 2 and all(p.isascii() and p.isdigit() for p in parts):
        index, count = int(parts[0]), int(parts[1])
        if 1 <= index <= count:
            return Shard(index=index, count=count)
    raise DiagnosticError(
        [
            error(
                "invalid-option",
                f"--shard must be I/N with 1 <= I <= N, got {raw}",
                expected="e.g. --shard 2/4",
            )
        ]
    )


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def pass_env_problems(names: Sequence[str]) -> list[Diagnostic]:
    """``invalid-option`` for every ``--pass-env`` value that is not a variable name."""
    problems = []
    for name in names:
        if _ENV_NAME.match(name):
            continue
        if not name.strip():
            reason = "needs the name of an environment variable, got an empty value"
        elif "=" in name:
            reason = (
                f"takes a variable name, not NAME=VALUE: got {name!r} (export "
                f"{name.split('=', 1)[0]} in the environment and pass --pass-env "
                f"{name.split('=', 1)[0]})"
            )
        else:
            reason = f"takes a variable name (letters, digits, _), got {name!r}"
        problems.append(
            error(
                "invalid-option",
                f"--pass-env {reason}",
                expected="an environment variable name, e.g. --pass-env ANTHROPIC_BASE_URL",
            )
        )
    return problems


def run_options(**raw: Any) -> RunOptions:
    """Build :class:`RunOptions`, turning bad values into diagnostics (exit 2).

    ``trials`` is validated like ``--trials`` (``invalid-trials``); ``shard`` may be
    the ``I/N`` text.
    """
    if "trials" in raw:
        raw["trials"] = parse_trials(raw["trials"])
    if "shard" in raw:
        raw["shard"] = parse_shard(raw["shard"])
    for key in ("jobs", "alpha", "margin"):
        if raw.get(key) is None:
            raw.pop(key, None)
    for key in ("scenarios", "pass_env"):
        if raw.get(key) is None:
            raw.pop(key, None)
        elif key in raw:
            raw[key] = tuple(raw[key])
    problems = pass_env_problems(raw.get("pass_env", ()))
    if problems:
        raise DiagnosticError(problems)
    try:
        options = RunOptions(**raw)
    except ValidationError as exc:
        raise DiagnosticError(
            [_option_error(detail) for detail in exc.errors(include_url=False)]
        ) from None
    problems = adaptive_problems(options) + balance_problems(options)
    if problems:
        raise DiagnosticError(problems)
    return options


def adaptive_problems(options: RunOptions) -> list[Diagnostic]:
    """The ``invalid-option`` errors of the adaptive options' combinations (exit 2)."""
    found: list[Diagnostic] = []
    if options.until_decided and options.against is None:
        found.append(
            error(
                "invalid-option",
                "--until-decided needs --against BASELINE_REPORT: the report to compare with",
                next="add --against PATH (a report.json or its run directory)",
            )
        )
    if options.against is not None and not options.until_decided:
        found.append(
            error(
                "invalid-option",
                "--against is only used by adaptive runs: add --until-decided",
                next="add --until-decided, or run and then `atlante-eval compare BASE HEAD`",
            )
        )
    loose = [
        flag
        for flag, value in (
            ("--min-trials", options.min_trials),
            ("--max-trials", options.max_trials),
            ("--max-cost", options.max_cost),
        )
        if value is not None
    ]
    loose += [f"--{name}" for name in ("margin", "alpha") if name in options.model_fields_set]
    if loose and not options.until_decided:
        found.append(
            error(
                "invalid-option",
                f"{', '.join(loose)} only apply to adaptive runs (--until-decided)",
                next="add --until-decided --against BASELINE_REPORT, or drop the option",
            )
        )
    low, high = options.min_trials or options.trials, options.max_trials
    if options.until_decided and low is not None and high is not None and low > high:
        found.append(
            error(
                "invalid-option",
                f"the first look ({low} trials) is above --max-trials {high}",
                next="lower --min-trials (or --trials) or raise --max-trials",
            )
        )
    if options.until_decided and options.shard is not None:
        found.append(
            error(
                "invalid-option",
                "--until-decided cannot be combined with --shard: an adaptive run decides "
                "how many trials each scenario gets as it goes, so its plan cannot be "
                "sliced in advance",
                next="run the adaptive run unsharded, or split it by --scenario",
            )
        )
    return found


def balance_problems(options: RunOptions) -> list[Diagnostic]:
    """The ``invalid-option`` errors of ``--balance`` / ``--balance-from`` (exit 2)."""
    found: list[Diagnostic] = []
    if options.balance == "duration" and options.shard is None:
        found.append(
            error(
                "invalid-option",
                "--balance duration splits the plan between shards: it needs --shard I/N",
                next="add --shard I/N (the same N and --balance options on every shard)",
            )
        )
    if options.balance == "duration" and options.balance_from is None:
        found.append(
            error(
                "invalid-option",
                "--balance duration needs --balance-from REPORT: the earlier report whose "
                "trial durations estimate this run's",
                next="add --balance-from PATH (a report.json or its run directory), the same "
                "file on every shard",
            )
        )
    if options.balance_from is not None and options.balance != "duration":
        found.append(
            error(
                "invalid-option",
                "--balance-from is only used with --balance duration",
                next="add --balance duration, or drop --balance-from",
            )
        )
    return found


#: The command-line flag of each option field, for messages in the option's own terms.
OPTION_FLAGS: dict[str, str] = {
    "scenarios": "--scenario",
    "trials": "--trials",
    "jobs": "--jobs",
    "out": "--out",
    "keep": "--keep",
    "pass_env": "--pass-env",
    "retry_infra": "--retry-infra",
    "resume": "--resume",
    "shard": "--shard",
    "balance": "--balance",
    "balance_from": "--balance-from",
    "last_failed": "--last-failed",
    "against": "--against",
    "until_decided": "--until-decided",
    "min_trials": "--min-trials",
    "max_trials": "--max-trials",
    "max_cost": "--max-cost",
    "alpha": "--alpha",
    "margin": "--margin",
}


#: Integer bounds of the numeric options (``None``: unbounded).
_BOUNDS: dict[str, tuple[int, int | None]] = {
    "trials": (1, 50),
    "min_trials": (1, 50),
    "max_trials": (1, 50),
    "jobs": (1, None),
    "retry_infra": (0, MAX_RETRY_INFRA),
}


def _option_error(detail: Any) -> Diagnostic:
    """Say a pydantic error about a field in terms of its flag (``--retry-infra must be 0..10``)."""
    loc = detail.get("loc") or ()
    field = str(loc[0]) if loc else ""
    flag = OPTION_FLAGS.get(field, field)
    got = detail.get("input")
    if field in _BOUNDS:
        low, high = _BOUNDS[field]
        wanted = f"{low}..{high}" if high is not None else f"an integer >= {low}"
        return error("invalid-option", f"{flag} must be {wanted}, got {got!r}")
    return error("invalid-option", f"{flag}: {detail.get('msg', 'invalid value')}, got {got!r}")
