"""Load what a run's end needs while its first sessions wait on the model.

A run ends by publishing ``report.html`` (jinja2, pygments, the page modules,
the compiled templates) and, by default, recording itself in the history store
(SQLAlchemy, in a process of its own: :mod:`.recorder`). Loading them is a fixed
cost of a few hundred milliseconds of CPU that used to come after the last
session, where the user waits for it. Once the first session is over (never
before it: the launch path stays as small as ``tests/test_launch_path.py`` pins
it), one daemon thread imports the page modules, calls their warmer (a
``module:function`` entry: it compiles the templates), and then starts the
recorder's process (``then``), while the sessions wait on the model, so the end
finds them ready. A step that fails there is left for the end to do again, and
report, as before.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence

__all__ = ["END_MODULES", "end_modules", "prewarmer"]

#: What publishing ``report.html`` imports (``module:function``: import, then call it).
END_MODULES = ("atlante_eval.views.html.render:warm_run_page",)


def end_modules(*, html: bool) -> tuple[str, ...]:
    """What the end of a run with these options will import in the run's process."""
    return END_MODULES if html else ()


def prewarmer(
    modules: Sequence[str], *, then: Callable[[], None] | None = None
) -> Callable[[], None]:
    """A callable that starts importing ``modules`` (and calling the ``module:function``
    ones) in the background, then calls ``then``, once (later calls: no-op)."""
    names = tuple(modules)
    started = threading.Event()

    def start() -> None:
        if started.is_set() or not (names or then):
            return
        started.set()
        threading.Thread(
            target=_load, args=(names, then), name="atlante-eval-prewarm", daemon=True
        ).start()

    return start


def _load(names: Sequence[str], then: Callable[[], None] | None) -> None:
    for name in names:
        module, _, function = name.partition(":")
        try:
            loaded = importlib.import_module(module)
            if function:
                getattr(loaded, function)()
        except Exception:  # noqa: BLE001 - the run's end does it again and reports the problem
            break
    if then is not None:
        then()
