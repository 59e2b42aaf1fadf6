"""A command check's output as the views show it: its end, and where the rest is.

A command check keeps the last 2,000 characters of its program's output as
evidence (``output``), and the whole output, when longer, in ``check-N.log``
beside the trial's transcript (``outputLog``, run-relative). A failure is read
at the end, so :func:`output_excerpt` keeps the *last* lines and says how many
came before and where the full output is: ``show`` prints it, and the HTML
report's trial panel can render ``lines`` preformatted and link ``log`` wherever
the output is cut. The text is as recorded (untrusted): renderers escape it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["OUTPUT_LINES", "OutputExcerpt", "output_excerpt", "output_log"]

#: Most lines of a command's output ``show`` prints (the last ones).
OUTPUT_LINES = 20
#: Characters of output a command check keeps as evidence (``checks.core``).
_EVIDENCE_CHARS = 2000


@dataclass(frozen=True, slots=True)
class OutputExcerpt:
    """The end of a check's recorded output."""

    lines: list[str]
    """The last lines, in order."""
    earlier: int
    """Lines of the recorded output before :attr:`lines` (not shown)."""
    cut: bool
    """The recorded output is itself only the end of what the program printed."""
    log: str | None
    """Where the whole output is (``check-N.log``), when it was kept."""

    @property
    def whole(self) -> bool:
        """Nothing was left out."""
        return not self.earlier and not self.cut


def output_log(evidence: Mapping[str, Any], run_dir: Path | None) -> str | None:
    """The full output's file of a check (``outputLog``), under ``run_dir`` when known."""
    log = evidence.get("outputLog")
    if not isinstance(log, str) or not log:
        return None
    return str(run_dir / log) if run_dir is not None else log


def output_excerpt(
    text: str,
    evidence: Mapping[str, Any],
    *,
    run_dir: Path | None = None,
    max_lines: int = OUTPUT_LINES,
) -> OutputExcerpt:
    """The last ``max_lines`` lines of ``text`` (a check's ``output``), with what was left out."""
    lines = text.splitlines()
    shown = lines[-max_lines:] if max_lines > 0 else []
    log = output_log(evidence, run_dir)
    cut = log is not None or len(text) >= _EVIDENCE_CHARS
    return OutputExcerpt(lines=shown, earlier=len(lines) - len(shown), cut=cut, log=log)
