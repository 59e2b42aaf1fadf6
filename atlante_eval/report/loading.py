"""Read published reports back: a ``report.json`` path or the run directory holding one.

Every problem (missing file, unreadable bytes, invalid JSON, wrong shape) becomes a
``report-unreadable`` diagnostic (exit 2). Reports written by the reference
TypeScript tool load too: they lack the additive fields, which are all optional,
and the statistics they lack are recomputed from their trials where needed
(:func:`atlante_eval.report.results.statistics_of`). Two historical quirks of that tool
are accepted: ``meta.config.checkTimeoutMs`` (the old name of
``checkTimeoutDefaultMs``) and fractional millisecond durations, which are rounded.

Reading is bounded: only regular files are opened (a FIFO or a device is refused
without blocking), at most :data:`MAX_REPORT_BYTES` are read, documents nested
deeper than :data:`MAX_REPORT_DEPTH` and numbers beyond 18 digits (or infinite)
are refused, so no report can hang, exhaust memory, or crash a reader.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._util.jsondoc import DocumentReadError, json_depth, read_document
from .._util.paths import display_path
from ..diagnostics import DiagnosticError, error
from .models import REPORT_FILE, REPORT_FORMAT_VERSION, RunReport

__all__ = [
    "MAX_REPORT_BYTES",
    "MAX_REPORT_DEPTH",
    "REPORT_FILE",
    "load_report",
    "report_path",
]

#: Largest report file read back: 256 MiB.
MAX_REPORT_BYTES = 256 * 1024 * 1024
#: Deepest nesting of arrays and objects accepted in a report.
MAX_REPORT_DEPTH = 64
#: Longest integer literal accepted (durations, counts, tokens): 18 digits.
_MAX_INT_DIGITS = 18


class _NumberOutOfRange(ValueError):
    """Raised while parsing a report that holds a number no report can hold."""


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > _MAX_INT_DIGITS:
        raise _NumberOutOfRange(f"{literal[:24]}... has more than {_MAX_INT_DIGITS} digits")
    return int(literal)


def _bounded_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _NumberOutOfRange(f"{literal[:24]} is out of range")
    return value


_DURATION_KEYS = frozenset({"durationMs", "meanDurationMs", "durationP95Ms", "wallTimeMs"})
_SHOWN_ERRORS = 3


def report_path(path: Path | str) -> Path:
    """Return the report file for ``path``: itself, or ``<path>/report.json`` for a directory."""
    candidate = Path(path)
    return candidate / REPORT_FILE if candidate.is_dir() else candidate


def load_report(path: Path | str) -> RunReport:
    """Load and validate the report at ``path`` (a report file or a run directory).

    Raises:
        DiagnosticError: ``report-unreadable`` (exit 2) with what went wrong and what to do.
    """
    file = report_path(path)
    source = display_path(file)
    if not os.path.lexists(file):
        raise _unreadable(
            f"no report at {display_path(file)}",
            source,
            next_step="pass a report.json file or the run directory that contains one",
        )
    try:
        text = read_document(file, max_bytes=MAX_REPORT_BYTES, follow_symlinks=True)
    except DocumentReadError as exc:
        raise _unreadable(
            f"{source} {exc}",
            source,
            cause=str(exc),
            next_step="pass a regular report.json file written by atlante-eval",
        ) from None
    depth = json_depth(text)
    if depth > MAX_REPORT_DEPTH:
        raise _unreadable(
            f"{source} nests {depth} levels deep, more than the {MAX_REPORT_DEPTH} a report has",
            source,
            next_step="pass the report.json a run wrote; this file is not one",
        )
    try:
        json.loads(text, parse_int=_bounded_int, parse_float=_bounded_float)
    except _NumberOutOfRange as exc:
        raise _unreadable(
            f"{display_path(file)} holds a number no report can hold: {exc}",
            source,
            next_step="pass the report.json a run wrote; this file was edited or is not one",
        ) from None
    except ValueError:
        pass  # reported with its position by the validation below
    try:
        return RunReport.model_validate_json(text)
    except ValidationError as exc:
        first_error = exc
    legacy = _legacy_form(text)
    if legacy is not None:
        try:
            return RunReport.model_validate(legacy)
        except ValidationError:
            pass
    raise _invalid(file, text, first_error) from None


def _invalid(file: Path, text: str, exc: ValidationError) -> DiagnosticError:
    errors = exc.errors(include_url=False, include_input=False)
    if errors and errors[0]["type"] == "json_invalid":
        return _unreadable(
            f"{display_path(file)} is not valid JSON",
            display_path(file),
            cause=errors[0]["msg"],
            next_step="pass the report.json a run wrote; it may be truncated or edited",
        )
    details = "; ".join(f"{_pointer(e['loc']) or '/'}: {e['msg']}" for e in errors[:_SHOWN_ERRORS])
    more = len(errors) - _SHOWN_ERRORS
    if more > 0:
        details += f"; and {more} more"
    next_step = "pass a report.json written by atlante-eval or atlante eval"
    version = _format_version(text)
    if version is not None and version > REPORT_FORMAT_VERSION:
        next_step = f"the report uses format version {version}; upgrade atlante-eval to read it"
    return _unreadable(
        f"{display_path(file)} is not a valid run report: {details}",
        display_path(file),
        pointer=_pointer(errors[0]["loc"]) if errors else None,
        next_step=next_step,
    )


def _legacy_form(text: str) -> dict[str, Any] | None:
    """Return the document with the reference tool's old spellings fixed, or None."""
    try:
        document = json.loads(text)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    changed = False
    meta = document.get("meta")
    config = meta.get("config") if isinstance(meta, dict) else None
    if (
        isinstance(config, dict)
        and "checkTimeoutMs" in config
        and "checkTimeoutDefaultMs" not in config
    ):
        config["checkTimeoutDefaultMs"] = config.pop("checkTimeoutMs")
        changed = True
    changed = _round_durations(document) or changed
    return document if changed else None


def _round_durations(value: object) -> bool:
    """Round fractional millisecond durations in place (halves up); True if any changed."""
    changed = False
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _DURATION_KEYS and isinstance(item, float) and math.isfinite(item):
                value[key] = math.floor(item + 0.5)
                changed = True
            else:
                changed = _round_durations(item) or changed
    elif isinstance(value, list):
        for item in value:
            changed = _round_durations(item) or changed
    return changed


def _format_version(text: str) -> int | None:
    try:
        document = json.loads(text)
    except ValueError:
        return None
    meta = document.get("meta") if isinstance(document, dict) else None
    version = meta.get("formatVersion") if isinstance(meta, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def _pointer(loc: tuple[int | str, ...]) -> str:
    """RFC 6901 pointer for a pydantic error location (JSON names, escaped)."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in loc)


def _unreadable(
    message: str,
    source: str,
    *,
    cause: str | None = None,
    pointer: str | None = None,
    next_step: str = "pass a report.json written by atlante-eval or atlante eval",
) -> DiagnosticError:
    return DiagnosticError(
        [
            error(
                "report-unreadable",
                message,
                source=source,
                pointer=pointer,
                cause=cause,
                next=next_step,
            )
        ]
    )
