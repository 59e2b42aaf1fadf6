"""The command line builds its models without pydantic plugins, and does not look for any.

pydantic looks for third-party plugins (the ``pydantic`` entry-point group) when
it builds its first model: that scan imports ``importlib.metadata`` (with
``email``, ``zipfile`` and ``csv``) and reads the metadata of every installed
distribution, about 20 ms and 2.3 MiB of every ``run`` that are spent before the
first session. atlante-eval's models are its own file formats; a plugin
observing their validation is nothing the CLI offers. So :func:`skip_pydantic_plugins`
answers pydantic's lookup with "none", as ``PYDANTIC_DISABLE_PLUGINS=__all__`` does,
without the scan. Only the console script calls it (``cli.app.main``): a program
that imports the library keeps its plugins.
"""

from __future__ import annotations

import importlib
import sys
import types

__all__ = ["PLUGIN_LOADER", "skip_pydantic_plugins"]

#: The module pydantic asks for its plugins (``get_plugins()``).
PLUGIN_LOADER = "pydantic.plugin._loader"


def _no_plugins() -> tuple[()]:
    return ()


def skip_pydantic_plugins() -> bool:
    """Answer pydantic's plugin lookup with none; False when it already looked."""
    if PLUGIN_LOADER in sys.modules:
        return False
    loader = types.ModuleType(PLUGIN_LOADER, "atlante-eval: no pydantic plugins in the CLI")

    def real(name: str) -> object:
        """Anything else pydantic asks of its loader (a later version may): the real
        module's. Dunder names are the import system's questions (``__path__``: is it a
        package?): they get the stand-in's plain answer."""
        if name.startswith("__"):
            raise AttributeError(name)
        if sys.modules.get(PLUGIN_LOADER) is loader:
            del sys.modules[PLUGIN_LOADER]
        return getattr(importlib.import_module(PLUGIN_LOADER), name)

    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    setattr(loader, "__getattr__", real)  # noqa: B010 - a module's __getattr__ (PEP 562)
    sys.modules[PLUGIN_LOADER] = loader
    return True
