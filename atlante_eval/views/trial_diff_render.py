"""Draw ``show --diff``: two trials' aligned timelines in two columns, the divergence marked.

Step names and inputs come from transcripts (untrusted): each cell goes through
:func:`~atlante_eval._util.terminal.printable` into a :class:`rich.text.Text`,
never into markup.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from .._util.terminal import printable, shorten
from .deltas_render import step_text
from .trial_diff import DiffSide, TrialDiffView

__all__ = ["CELL_WIDTH", "render_trial_diff"]

#: Widest column of one trial's steps.
CELL_WIDTH = 56
_OP = {"same": "=", "changed": "~", "removed": "-", "added": "+"}
_STYLE = {"same": "default", "changed": "yellow", "removed": "red", "added": "green"}


def _side_line(label: str, side: DiffSide) -> Text:
    line = Text(f"{label} run {printable(side.run_id)} trial {side.i}: ", style="bold")
    line.append(printable(side.verdict), style="green" if side.verdict == "pass" else "red")
    line.append(f" · {side.steps} steps")
    if side.cause:
        line.append(f" · {side.cause}")
    if side.transcript is None:
        line.append(" · no transcript", style="yellow")
    return line


def render_trial_diff(view: TrialDiffView, console: Console) -> None:
    """Print the header, then one row per aligned step: BASE left, HEAD right."""
    how = "as given" if view.chosen_by == "given" else "each side's typical trial"
    console.print(Text(f"diff {printable(view.scenario)} ({how})", style="bold"))
    console.print(_side_line("BASE", view.base))
    console.print(_side_line("HEAD", view.head))
    divergence = view.first_divergence
    console.print(
        Text(
            "identical timelines"
            if divergence is None
            else f"first divergence at step {divergence + 1} (edit distance {view.distance}); "
            "= same, ~ changed, - BASE only, + HEAD only"
        )
    )
    console.print()
    cells = [
        (shorten(printable(step_text(r.base)), CELL_WIDTH), printable(step_text(r.head)))
        for r in view.rows
    ]
    width = max([len("BASE"), *(len(old) for old, _ in cells)])
    console.print(Text(f"     {'#':>4}  {'BASE'.ljust(width)}  HEAD", style="bold"))
    for number, (row, (old, new)) in enumerate(zip(view.rows, cells, strict=True)):
        mark = ">" if number == divergence else " "
        line = Text(f"  {mark}{_OP[row.op]} {number + 1:>4}  ")
        line.append(f"{old.ljust(width)}  {shorten(new, CELL_WIDTH)}", style=_STYLE[row.op])
        if number == divergence:
            line.append("  <- first divergence", style="bold")
        console.print(line)
