"""Run options: one validated model for everything a run can be asked to do."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .choices import DEFAULT_JOBS
from .diagnostics import Diagnostic, DiagnosticError, error
from .plan import parse_trials

__all__ = ["DEFAULT_JOBS", "MAX_RETRY_INFRA", "RunOptions", "Shard", "parse_shard", "run_options"]

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
    last_failed: bool = False
    """Run only the scenarios that did not fully pass in the previous report."""


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
    if raw.get("jobs") is None:
        raw.pop("jobs", None)
    for key in ("scenarios", "pass_env"):
        if raw.get(key) is None:
            raw.pop(key, None)
        elif key in raw:
            raw[key] = tuple(raw[key])
    problems = pass_env_problems(raw.get("pass_env", ()))
    if problems:
        raise DiagnosticError(problems)
    try:
        return RunOptions(**raw)
    except ValidationError as exc:
        raise DiagnosticError(
            [_option_error(detail) for detail in exc.errors(include_url=False)]
        ) from None


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
    "last_failed": "--last-failed",
}


#: Integer bounds of the numeric options (``None``: unbounded).
_BOUNDS: dict[str, tuple[int, int | None]] = {
    "trials": (1, 50),
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
