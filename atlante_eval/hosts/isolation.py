"""Per-trial private directories and the environment a host session receives.

Every trial's host gets its own ``HOME``, XDG directories, ``TMPDIR`` and
``XDG_RUNTIME_DIR`` under the trial's state directory, so concurrent trials
share no configuration, credentials, caches, sessions, sockets or temp files.

A session's environment is built in layers, later layers winning:

1. the allowlisted slice of the parent environment (:func:`allowed_env`);
2. the host's credential variables, copied from the parent when set;
3. the host's defaults that switch off non-essential traffic;
4. the variables the user named with ``--pass-env`` (so a user can override a
   default such as ``npm_config_registry``);
5. the isolation directories, which nothing overrides.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from .._util.environment import allowed_env

__all__ = ["TRIAL_DIRS", "session_env", "trial_dirs"]

#: Environment variable -> directory under the trial's state directory.
TRIAL_DIRS: Mapping[str, str] = {
    "HOME": "home",
    "XDG_CONFIG_HOME": "config",
    "XDG_DATA_HOME": "data",
    "XDG_CACHE_HOME": "cache",
    "XDG_STATE_HOME": "state",
    "TMPDIR": "tmp",
    "XDG_RUNTIME_DIR": "run",
}


def trial_dirs(state_dir: Path) -> dict[str, str]:
    """Create the trial's private directories and return them by variable name.

    ``XDG_RUNTIME_DIR`` is created with mode 0700, as the XDG specification requires.
    """
    result: dict[str, str] = {}
    for name, relative in TRIAL_DIRS.items():
        path = state_dir / relative
        path.mkdir(parents=True, exist_ok=True)
        result[name] = str(path)
    (state_dir / TRIAL_DIRS["XDG_RUNTIME_DIR"]).chmod(0o700)
    return result


def session_env(
    *,
    isolation: Mapping[str, str],
    credentials: Iterable[str] = (),
    defaults: Mapping[str, str] | None = None,
    pass_env: Iterable[str] = (),
    drop: Iterable[str] = (),
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Return the environment of one host session (see the module docstring for layers).

    Args:
        isolation: the trial's private directories and host-specific paths.
        credentials: names copied from ``base`` when set and not blank.
        defaults: host defaults (traffic switches).
        pass_env: names the user passed with ``--pass-env``, copied verbatim when set.
        drop: names removed before the isolation layer is applied.
        base: the parent environment (default: ``os.environ``).
    """
    source = os.environ if base is None else base
    env = allowed_env(source)
    for name in credentials:
        value = source.get(name)
        if value is not None and value.strip():
            env[name] = value
    env.update(defaults or {})
    for name in pass_env:
        if name in source:
            env[name] = source[name]
    for name in drop:
        env.pop(name, None)
    env.update(isolation)
    return env
