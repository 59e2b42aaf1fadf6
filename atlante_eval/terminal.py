"""Terminal conventions shared by the CLI and the progress printer (import-light)."""

from __future__ import annotations

import os

__all__ = ["use_color"]


def use_color(stream: object) -> bool:
    """Colour only an interactive stream, and only when ``NO_COLOR`` is unset or empty."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
