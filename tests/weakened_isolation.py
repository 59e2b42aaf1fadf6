"""Deliberately weakened isolation code paths: the engine as it was before issue 23.

Each attack test runs once against one of these (where the attack must get
through, which proves the test can see it) and once against the real engine.
:func:`apply` installs weakenings by name, in-process (tests pass a
``monkeypatch``) or in a CLI subprocess (``tests/standin_cli.py`` reads
``ATLANTE_TEST_WEAKEN``, a comma-separated list of names).

* ``binds``: the bind decision reads the files of the program run: the ``home =``
  line of a ``pyvenv.cfg`` beside its ``bin/`` and its ``#!`` line (followed up to
  four times), synchronously, following links, without a size cap or a
  regular-file check.
* ``setup-env``: setup gets the engine's full environment under ``os`` too.
* ``keyring``: confined processes inherit the engine's session keyring.
* ``kept``: kept sandboxes are handed over with the repositories the agent left.
* ``groups``: the isolation layer lets the exception group of its task groups
  out, wrapping whatever ended a trial inside it (a failed setup, ENOSPC, EMFILE).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from atlante_eval.isolation import bwrap


def _interpreter(real: str) -> str | None:
    """The ``#!`` interpreter of ``real``: a blocking open and read, links followed."""
    try:
        with Path(real).open("rb") as handle:
            head = handle.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        rest = [w for w in words[1:] if not w.startswith("-")]
        return bwrap._resolve(rest[0], os.environ.get("PATH", os.defpath)) if rest else None
    return words[0]


def _venv_base(program: Path) -> list[str]:
    """The ``home =`` of the ``pyvenv.cfg`` beside ``bin/``: read whole, whatever it is."""
    config = program.parent.parent / "pyvenv.cfg"
    try:
        lines = config.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return [str(Path(value.strip()) / "python3")]
    return []


def reading_install_roots(program: str, *, untrusted: Sequence[Path] = ()) -> list[Path]:
    """``install_roots`` before issue 23: widened by what the program's files say."""
    del untrusted  # the old code knew no untrusted tree
    roots: list[Path] = []
    pending = [program]
    for _ in range(4):
        if not pending:
            break
        name = pending.pop()
        real = os.path.realpath(name)
        venv = bwrap._venv_of(name)
        if venv is not None:
            roots.append(venv)
            pending.extend(_venv_base(Path(name)))
        elif "node_modules" in Path(name).parts:
            roots.append(bwrap._root_of(name))
        if not bwrap._is_visible(real):
            roots.append(bwrap._root_of(real))
        interpreter = _interpreter(real)
        if interpreter and interpreter != real:
            pending.append(interpreter)
    return list(dict.fromkeys(roots))


Setter = Callable[[Any, str, Any], None]


def _binds(set_attr: Setter) -> None:
    set_attr(bwrap, "install_roots", reading_install_roots)


def _setup_env(set_attr: Setter) -> None:
    from atlante_eval.run.engine import Engine

    set_attr(Engine, "_setup_env", lambda _self: None)


def _keyring(set_attr: Setter) -> None:
    from atlante_eval.trial import process

    set_attr(process, "join_fresh_session_keyring", lambda: None)


def _kept(set_attr: Setter) -> None:
    from atlante_eval.trial import sandbox

    set_attr(sandbox, "_defuse_kept", lambda _path: None)


def _groups(set_attr: Setter) -> None:
    from atlante_eval.isolation import trial

    set_attr(trial, "sole_error", lambda failure: failure)


WEAKENINGS: dict[str, Callable[[Setter], None]] = {
    "groups": _groups,
    "kept": _kept,
    "binds": _binds,
    "setup-env": _setup_env,
    "keyring": _keyring,
}


def apply(names: Sequence[str], set_attr: Setter = setattr) -> None:
    """Install the named weakenings (``set_attr``: ``monkeypatch.setattr`` in tests)."""
    for name in names:
        WEAKENINGS[name](set_attr)
