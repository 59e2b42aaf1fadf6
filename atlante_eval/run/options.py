"""Run options: one validated model for everything a run can be asked to do.

:class:`RunOptions` is the one definition of a run option: its field (with the
docstring), its flag in :data:`OPTION_FLAGS`, and the validator that reads it
both as command-line text (``--jobs 4``) and as a Python value (``jobs=4``). The
CLI and :func:`~atlante_eval.run.runner.run_eval` both build it with
:func:`run_options`, so a bad value reads the same from either: an
``invalid-option`` (``invalid-trials`` for ``--trials``) diagnostic in the
option's own terms, exit 2. Adding a run option is a field here, its flag, the
``run`` command's flag and ``run_eval``'s keyword; ``tests/test_runner_options.py``
checks that the four agree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Self, TypeVar, cast, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from ..choices import (
    DEFAULT_ALPHA,
    DEFAULT_JOBS,
    DEFAULT_MARGIN,
    DEFAULT_STATE_CAP_BYTES,
    GatewayMode,
    IsolationMode,
    ShardBalancing,
)
from ..diagnostics import Diagnostic, DiagnosticError, error
from ..project import parse_trials
from ..project.config import MAX_TRIALS, LimitsConfig
from ..project.variants import ARM_NAME_PATTERN, ArmSelection
from .isolate import isolation_mode
from .limit_options import parse_limits
from .pinning import pin_option

__all__ = [
    "DEFAULT_JOBS",
    "MAX_RETRY_INFRA",
    "OPTION_FLAGS",
    "RunOptions",
    "Shard",
    "adaptive_problems",
    "balance_problems",
    "gateway_mode",
    "options_from_keywords",
    "parse_shard",
    "parse_variants",
    "run_options",
]

#: Most retries ``--retry-infra`` allows per trial.
MAX_RETRY_INFRA = 10
_RETRIES = f"0..{MAX_RETRY_INFRA}"

_T = TypeVar("_T")


class _Refused(ValueError):
    """A value refused with diagnostics, carried through pydantic's validation."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = tuple(diagnostics)


def _checked(parse: Callable[[Any], _T]) -> Callable[[Any], _T]:
    """A field validator from a parser that raises :class:`DiagnosticError`."""

    def validate(value: Any) -> _T:
        try:
            return parse(value)
        except DiagnosticError as exc:
            raise _Refused(exc.diagnostics) from None

    return validate


def _reads(parse: Callable[[Any], object]) -> BeforeValidator:
    """The validator of a field ``parse`` reads, from command-line text or a Python value."""
    return BeforeValidator(_checked(parse))


def _integer(
    flag: str, *, low: int, high: int | None = None, wanted: str, expected: str | None = None
) -> Callable[[Any], int | None]:
    """A parser of an integer option: an int, or its decimal text (surrounding blanks allowed)."""

    def parse(value: Any) -> int | None:
        if value is None:
            return None
        number: int | None = None
        text = value.strip() if isinstance(value, str) else ""
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif text.isascii() and text.isdigit():
            number = int(text)
        if number is not None and low <= number and (high is None or number <= high):
            return number
        details = {"expected": expected} if expected is not None else {}
        raise DiagnosticError(
            [error("invalid-option", f"{flag} must be {wanted}, got {value}", **details)]
        )

    return parse


def gateway_mode(raw: object) -> GatewayMode | None:
    """Check a requested gateway mode; ``None`` means not asked (``eval.gateway`` applies).

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2) for anything but ``on`` or ``off``.
    """
    if raw is None:
        return None
    for mode in get_args(GatewayMode):
        if raw == mode:
            return cast(GatewayMode, mode)
    raise DiagnosticError(
        [
            error(
                "invalid-option",
                f"--gateway must be one of: on, off (got {raw!r})",
                expected="on, off",
            )
        ]
    )


def _history_url(value: Any) -> str | None:
    """``--history URL``: refused up front (``history-invalid-url``, exit 2) when unusable."""
    if value is None:
        return None
    from ..history import parse_history_url

    parse_history_url(value)
    return str(value)


def _trial_count(flag: str) -> Callable[[Any], int | None]:
    """A parser of ``--min-trials``/``--max-trials``: an integer from 1 to 50."""
    wanted = f"an integer from 1 to {MAX_TRIALS}"
    return _integer(flag, low=1, high=MAX_TRIALS, wanted=wanted, expected=wanted)


def _number(flag: str, *, high: float | None, closed: bool = True) -> Callable[[Any], float | None]:
    """A parser of a positive number option (``--margin``, ``--alpha``, ``--max-cost``)."""

    def parse(value: Any) -> float | None:
        if value is None:
            return None
        number = math.nan
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            number = _float(value)
        above = high is not None and (number > high if closed else number >= high)
        if math.isfinite(number) and number > 0 and not above:
            return number
        bound = "" if high is None else f" and {'at most' if closed else 'below'} {high:g}"
        raise DiagnosticError(
            [error("invalid-option", f"{flag} must be a number above 0{bound}, got {value}")]
        )

    return parse


_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
_SIZE = re.compile(r"^(\d+)([KMG]?)(?:I?B)?$", re.IGNORECASE)


def _size(flag: str) -> Callable[[Any], int | None]:
    """A parser of a size option: bytes as an int, or text with a binary unit (``64M``)."""

    def parse(value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        match = _SIZE.match(value.strip()) if isinstance(value, str) else None
        if match is not None:
            return int(match.group(1)) * _UNITS[match.group(2).upper()]
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    f"{flag} must be a size in bytes, or with a unit K, M or G (64M), got {value}",
                    expected="e.g. 256M",
                )
            ]
        )

    return parse


def _float(text: str) -> float:
    """``text`` (surrounding blanks allowed) as a float; NaN when it is not a number."""
    try:
        return float(text.strip())
    except ValueError:
        return math.nan


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


def parse_shard(raw: object) -> Shard | None:
    """Parse ``I/N`` (1 <= I <= N); a :class:`Shard` passes as it is.

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2).
    """
    if raw is None or isinstance(raw, Shard):
        return raw
    parts = raw.strip().split("/") if isinstance(raw, str) else []
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


def _pass_env(names: tuple[str, ...]) -> tuple[str, ...]:
    problems = pass_env_problems(names)
    if problems:
        raise DiagnosticError(problems)
    return names


def parse_variants(value: Any) -> ArmSelection:
    """``--variants none|all`` or the ``--variant`` names (``run_eval(variants=...)``: either).

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2) for another word, an empty list or a
            name no arm could have.
    """
    if value is None or value in ("none", "all"):
        return cast(ArmSelection, value)
    names = (value,) if isinstance(value, str) else value
    if isinstance(names, list | tuple) and names and all(isinstance(n, str) for n in names):
        bad = [n for n in names if not re.match(ARM_NAME_PATTERN, n)]
        if not bad:
            return tuple(dict.fromkeys(names))
        value = bad[0]
    raise DiagnosticError(
        [
            error(
                "invalid-option",
                f"--variant must name an arm of eval.variants (--variants takes none or all), "
                f"got {value!r}",
                expected="--variant NAME (repeatable), or --variants none|all",
            )
        ]
    )


class RunOptions(BaseModel):
    """Everything a run can be asked to do beyond the project's configuration."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenarios: tuple[str, ...] = ()
    """Scenario names or glob patterns to run (empty: all)."""
    trials: Annotated[int | None, _reads(parse_trials)] = None
    """Trials per scenario (1-50), overriding ``eval.budget.trials``."""
    jobs: Annotated[int, _reads(_integer("--jobs", low=1, wanted="a positive integer"))] = (
        DEFAULT_JOBS
    )
    """Trials run at once."""
    out: Path | None = None
    """Report base directory instead of ``<project>/.atlante/eval``."""
    keep: bool = False
    """Keep trial sandboxes."""
    pass_env: Annotated[tuple[str, ...], AfterValidator(_checked(_pass_env))] = ()
    """Parent environment variables handed to the host session."""
    retry_infra: Annotated[
        int, _reads(_integer("--retry-infra", low=0, high=MAX_RETRY_INFRA, wanted=_RETRIES))
    ] = 0
    """Reruns of a trial while it ends in infra-error (0-10)."""
    resume: Path | None = None
    """Run directory of an earlier run whose matching trials are reused."""
    shard: Annotated[Shard | None, _reads(parse_shard)] = None
    """Run only this slice of the plan (``I/N`` as text)."""
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
    min_trials: Annotated[int | None, _reads(_trial_count("--min-trials"))] = None
    """Trials per scenario at the first look (default: the configured trials)."""
    max_trials: Annotated[int | None, _reads(_trial_count("--max-trials"))] = None
    """Most trials per scenario in an adaptive run (1-50, default 50)."""
    max_cost: Annotated[float | None, _reads(_number("--max-cost", high=None))] = None
    """Stop adding waves once the host-reported cost reaches this many USD."""
    alpha: Annotated[float, _reads(_number("--alpha", high=1.0, closed=False))] = DEFAULT_ALPHA
    """Adaptive runs: error rate over all looks (0 < alpha < 1)."""
    margin: Annotated[float, _reads(_number("--margin", high=1.0))] = DEFAULT_MARGIN
    """Adaptive runs: largest change counted as unchanged (0 < margin <= 1)."""
    html: bool = True
    """Write ``report.html`` beside ``report.json`` (``--no-html`` turns it off)."""
    isolation: Annotated[IsolationMode | None, _reads(isolation_mode)] = None
    """How trials are contained, overriding ``eval.isolation`` (docs/isolation.md)."""
    gateway: Annotated[GatewayMode | None, _reads(gateway_mode)] = None
    """Whether trials reach their model through the engine's gateway, overriding
    ``eval.gateway`` (docs/gateway.md)."""
    history: bool = False
    """Record the run in the history store after publishing it (the CLI's default;
    ``--no-history`` turns it off; docs/history.md)."""
    history_url: Annotated[str | None, _reads(_history_url)] = None
    """The history store instead of ``eval.history`` (``--history URL``)."""
    alert_webhook: str | None = None
    """POST a regression alert here instead of ``eval.alerts.webhook``."""
    limits: Annotated[LimitsConfig, _reads(parse_limits)] = LimitsConfig()
    """Per-trial resource limits (``KEY=VALUE`` texts or a mapping), each over its
    ``eval.limits`` key (docs/isolation.md#resource-limits)."""
    host_version: Annotated[str | None, _reads(pin_option)] = None
    """The exact host version to run from the managed host cache, overriding
    ``eval.hostVersion`` (docs/hosts.md)."""
    variants: Annotated[ArmSelection, _reads(parse_variants)] = None
    """The arms of ``eval.variants`` to run: their names (``--variant``), ``"all"`` or
    ``"none"`` (``--variants``); default every configured arm (docs/variants.md)."""
    final_state: bool = True
    """Store each graded trial's final state for ``regrade`` (``--no-final-state``: off)."""
    final_state_cap: Annotated[int, _reads(_size("--final-state-cap"))] = DEFAULT_STATE_CAP_BYTES
    """The most content bytes (uncompressed) one trial's final state may refer to."""

    @model_validator(mode="after")
    def _combinations(self) -> Self:
        problems = adaptive_problems(self) + balance_problems(self)
        if problems:
            raise _Refused(problems)
        return self


def run_options(**given: Any) -> RunOptions:
    """Build :class:`RunOptions` from option values as given; ``None`` means not given.

    Values may be command-line text (``jobs="4"``, ``shard="2/4"``) or Python values
    (``jobs=4``); each is read by its field's validator, so the CLI and
    :func:`~atlante_eval.run.runner.run_eval` refuse a bad value in the same words.

    Raises:
        DiagnosticError: every refused value, in the option's own terms
            (``invalid-option``; ``invalid-trials`` for ``trials``), exit 2.
    """
    try:
        return RunOptions(**{name: value for name, value in given.items() if value is not None})
    except ValidationError as exc:
        raise DiagnosticError(_diagnostics(exc)) from None


def options_from_keywords(keywords: Mapping[str, object]) -> RunOptions:
    """:func:`run_options` of a call's keyword arguments: those named like a field.

    ``run_eval`` passes its ``locals()``, so each of its option keywords reaches its
    field without being spelled a second time.
    """
    fields = RunOptions.model_fields
    return run_options(**{name: value for name, value in keywords.items() if name in fields})


def _diagnostics(exc: ValidationError) -> list[Diagnostic]:
    """The diagnostics of a refused :class:`RunOptions`: the validators' own, else pydantic's."""
    found: list[Diagnostic] = []
    for detail in exc.errors(include_url=False):
        cause = (detail.get("ctx") or {}).get("error")
        if isinstance(cause, _Refused):
            found.extend(cause.diagnostics)
        else:
            found.append(_option_error(detail))
    return found


def adaptive_problems(options: RunOptions) -> list[Diagnostic]:
    """The ``invalid-option`` errors of the adaptive options' combinations (exit 2)."""
    found: list[Diagnostic] = []
    # --until-decided without --against is decided with the project (arms need none).
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
    if options.balance == "duration" and options.balance_from is None and not options.history:
        found.append(
            error(
                "invalid-option",
                "--balance duration needs --balance-from REPORT, or the history store's last "
                "run (--no-history turns that off): the earlier report whose trial durations "
                "estimate this run's",
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


#: The ``run`` flag of each option field, for messages in the option's own terms
#: (``tests/test_runner_options.py`` checks it names every field and every flag).
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
    "html": "--no-html",
    "isolation": "--isolation",
    "gateway": "--gateway",
    "history": "--no-history",
    "history_url": "--history",
    "alert_webhook": "--alert-webhook",
    "limits": "--limit",
    "host_version": "--host-version",
    "variants": "--variant",
    "final_state": "--no-final-state",
    "final_state_cap": "--final-state-cap",
}


def _option_error(detail: Any) -> Diagnostic:
    """Say a pydantic error about a field in terms of its flag (``--keep: Input should be...``)."""
    loc = detail.get("loc") or ()
    field = str(loc[0]) if loc else ""
    flag = OPTION_FLAGS.get(field, field)
    got = detail.get("input")
    return error("invalid-option", f"{flag}: {detail.get('msg', 'invalid value')}, got {got!r}")
