"""Load what a run's end needs while its last sessions wait on the model.

A run ends by publishing ``report.html`` (jinja2, pygments, the page modules,
the compiled templates) and, by default, recording itself in the history store
(SQLAlchemy, in a process of its own: :mod:`.recorder`). Loading them is a fixed
cost of a few hundred milliseconds of CPU that used to come after the last
session, where the user waits for it. Never before the first session is over
(the launch path stays as small as ``tests/test_launch_path.py`` pins it), the
engine's session-end hook (:func:`end_prewarm`) starts them in daemon threads:
the recorder's process at once, and the page modules and their warmer (a
``module:function`` entry: it compiles the templates) once no trial waits to
start, so the warm-up takes no CPU from trials being handed their slots; the end
finds them ready. A step that fails there is left for the end to do again, and
report, as before.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence

__all__ = ["END_MODULES", "end_modules", "end_prewarm", "prewarmer"]

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


def end_prewarm(
    modules: Sequence[str], start_recorder: Callable[[], None] | None
) -> Callable[[bool], None]:
    """The engine's session-end hook: the recorder's process starts after the first
    session, the in-process warm-up (``modules``) once no trial waits to start.

    The warm-up holds the interpreter for a few hundred milliseconds of CPU; done
    while trials still wait for slots, it delayed their hand-overs (48 trials at
    16 concurrent: up to 270 ms each). Once every trial has started, only the
    sessions are left to wait on, and the end still finds the pages ready.
    """
    recorder = prewarmer((), then=start_recorder)
    warm = prewarmer(modules)

    def on_session_end(all_started: bool) -> None:
        recorder()
        if all_started:
            warm()

    return on_session_end


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
