"""``run --limit KEY=VALUE`` (and ``run_eval(limits=...)``): per-trial resource limits.

The values read exactly as ``eval.limits`` (:class:`~atlante_eval.project.config.LimitsConfig`):
``memoryMb``, ``pids`` and ``tmpMb`` take integers, ``cpus`` a number, each also
``unlimited``; a bad key or value is ``invalid-option`` (exit 2) in the flag's terms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ..diagnostics import Diagnostic, DiagnosticError, error
from ..project.config import LimitsConfig

__all__ = ["LIMIT_KEYS", "parse_limits"]

#: The keys ``--limit`` takes, as ``eval.limits`` spells them, with their field names.
LIMIT_KEYS: dict[str, str] = {
    "memoryMb": "memory_mb",
    "pids": "pids",
    "cpus": "cpus",
    "tmpMb": "tmp_mb",
}
_EXPECTED = "KEY=VALUE with KEY one of memoryMb, pids, cpus, tmpMb, e.g. --limit memoryMb=2048"


def parse_limits(raw: object) -> LimitsConfig:
    """Read ``--limit`` values (``KEY=VALUE`` texts) or a ``{key: value}`` mapping.

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2) for every bad entry.
    """
    if raw is None:
        return LimitsConfig()
    if isinstance(raw, LimitsConfig):
        return raw
    values: dict[str, object] = {}
    problems: list[Diagnostic] = []
    if isinstance(raw, Mapping):
        items: list[tuple[object, object]] = list(raw.items())
    elif isinstance(raw, Sequence) and not isinstance(raw, str):
        items = [_split(entry, problems) for entry in raw]
    else:
        items = [_split(raw, problems)]
    for key, value in items:
        if key is None:
            continue
        field = LIMIT_KEYS.get(str(key)) or (str(key) if str(key) in LIMIT_KEYS.values() else None)
        if field is None:
            problems.append(_bad(f"--limit: unknown limit {str(key)!r}"))
        elif field in values:
            problems.append(_bad(f"--limit {key} is given more than once"))
        else:
            values[field] = _number(value)
    if problems:
        raise DiagnosticError(problems)
    try:
        return LimitsConfig(**values)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise DiagnosticError([_value_error(detail) for detail in exc.errors()]) from None


def _split(entry: object, problems: list[Diagnostic]) -> tuple[object, object]:
    """``KEY=VALUE`` as a pair; a malformed entry is a problem and ``(None, None)``."""
    if isinstance(entry, str) and "=" in entry:
        key, _, value = entry.partition("=")
        if key.strip() and value.strip():
            return key.strip(), value.strip()
    problems.append(_bad(f"--limit takes KEY=VALUE, got {entry!r}"))
    return None, None


def _number(value: object) -> object:
    """Command-line text as the number it spells (``"256"`` → 256, ``"0.5"`` → 0.5)."""
    if not isinstance(value, str) or value == "unlimited":
        return value
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _value_error(detail: Any) -> Diagnostic:
    loc = detail.get("loc") or ()
    field = str(loc[0]) if loc else ""
    key = next((k for k, f in LIMIT_KEYS.items() if f == field), field)
    message = str(detail.get("msg", "invalid value")).removeprefix("Value error, ")
    return _bad(f"--limit {key} {message}")


def _bad(message: str) -> Diagnostic:
    return error("invalid-option", message, expected=_EXPECTED)
