"""Route an OpenCode (V1) trial's provider through the gateway.

``eval.model`` (``provider/model``) names the provider. Its real URL is the
``baseURL`` of that provider in the ``OPENCODE_CONFIG_CONTENT`` the user passed
with ``--pass-env`` (``{env:NAME}`` read from a passed variable), else the
provider's public API (:data:`OPENCODE_PROVIDER_URLS`). The provider's credential:

* an ``auth.json`` entry of type ``api``: the trial's copy keeps that entry alone,
  its key a stand-in token;
* an ``apiKey`` in the passed ``OPENCODE_CONFIG_CONTENT`` (literal or
  ``{env:NAME}``), or the provider's key variable passed with ``--pass-env``: a
  stand-in token in its place;
* an ``oauth`` or ``wellknown`` entry (a login OpenCode refreshes or fetches
  itself): declined, the host calls its provider directly.

OpenCode 2.x keeps its credentials in its database, so V2 trials are declined.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from .._util.jsondoc import DocumentParseError, parse_document
from .base import HostError, ModelRoute
from .routing import reach_gateway_directly

__all__ = [
    "OPENCODE_PROVIDER_KEYS",
    "OPENCODE_PROVIDER_URLS",
    "opencode_route",
    "opencode_routed_config",
    "opencode_routed_env",
]

#: The public API of the providers the gateway can route without a configured ``baseURL``.
OPENCODE_PROVIDER_URLS: Mapping[str, str] = {
    "anthropic": "https://api.anthropic.com/v1",
    "openai": "https://api.openai.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
}
#: The variable each of those providers reads its key from.
OPENCODE_PROVIDER_KEYS: Mapping[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
_INLINE = "OPENCODE_CONFIG_CONTENT"


def _inline_config(parent: Mapping[str, str], pass_env: Sequence[str]) -> dict[str, Any] | None:
    text = parent.get(_INLINE) if _INLINE in pass_env else None
    if text is None:
        return None
    try:
        value = parse_document(text, jsonc=True)
    except DocumentParseError:
        return None
    return value if isinstance(value, dict) else None


def _options(config: Mapping[str, Any] | None, provider: str) -> dict[str, Any] | None:
    providers = config.get("provider") if config is not None else None
    entry = providers.get(provider) if isinstance(providers, dict) else None
    options = entry.get("options") if isinstance(entry, dict) else None
    return options if isinstance(options, dict) else None


def _resolved(value: object, env: Mapping[str, str], pass_env: Sequence[str]) -> str | None:
    """A config string with ``{env:NAME}`` read from a passed variable (``None``: unset)."""
    if not isinstance(value, str) or not value.strip():
        return None
    if value.startswith("{env:") and value.endswith("}"):
        name = value[5:-1]
        return env.get(name) or None if name in pass_env else None
    return value


def _read_auth(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as exc:
        raise HostError(f"could not read the trial's OpenCode credentials: {exc}") from None
    return value if isinstance(value, dict) else {}


def _write_auth(path: Path, document: Mapping[str, Any]) -> None:
    """Replace the trial's ``auth.json`` (mode 0600, never through a link)."""
    try:
        path.unlink(missing_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(path, flags, 0o600), "w", encoding="utf-8") as handle:
            handle.write(json.dumps(document, indent=2) + "\n")
    except OSError as exc:
        raise HostError(f"could not write the trial's OpenCode credentials: {exc}") from None


def opencode_route(
    route: ModelRoute,
    *,
    model: str | None,
    dialect: str,
    auth_json: Path,
    parent: Mapping[str, str],
    pass_env: Sequence[str],
) -> str | None:
    """Bind ``route`` to the trial's provider (rewriting ``auth_json``), or decline it.

    Returns:
        The routed provider's id, or ``None`` when declined.

    Raises:
        HostError: the trial's credentials file cannot be read or rewritten.
    """
    if dialect != "v1":
        route.decline("OpenCode 2.x keeps its credentials in its database; the gateway "
                      "routes OpenCode 1.x")  # fmt: skip
        return None
    if not model or "/" not in model:
        route.decline("eval.model does not name the provider (provider/model), so the gateway "
                      "cannot know where OpenCode's calls go")  # fmt: skip
        return None
    provider = model.split("/", 1)[0]
    options = _options(_inline_config(parent, pass_env), provider)
    upstream = _resolved((options or {}).get("baseURL"), parent, pass_env)
    upstream = upstream or OPENCODE_PROVIDER_URLS.get(provider)
    if upstream is None:
        route.decline(f"the gateway does not know where provider {provider!r} is: give its "
                      "baseURL in OPENCODE_CONFIG_CONTENT")  # fmt: skip
        return None
    stored = _read_auth(auth_json)
    entry = stored.get(provider)
    kind = entry.get("type") if isinstance(entry, dict) else None
    if kind is not None and kind != "api":
        route.decline(f"provider {provider!r} is signed in with an {kind} login OpenCode "
                      "refreshes itself, so its auth.json entry stays in the sandbox")  # fmt: skip
        return None
    route.bind(upstream)
    if auth_json.exists():
        kept: dict[str, Any] = {}
        if isinstance(entry, dict) and isinstance(entry.get("key"), str):
            kept[provider] = {**entry, "key": route.stand_in(entry["key"])}
        _write_auth(auth_json, kept)
    return provider


def opencode_routed_config(route: ModelRoute, provider: str) -> dict[str, Any]:
    """The ``provider`` section the authored configuration gets: the route as ``baseURL``."""
    return {provider: {"options": {"baseURL": route.base_url}}}


def opencode_routed_env(
    env: MutableMapping[str, str], route: ModelRoute, provider: str, pass_env: Sequence[str]
) -> None:
    """Point a session's passed configuration and key variables at the route."""
    key_variable = OPENCODE_PROVIDER_KEYS.get(provider)
    if key_variable and key_variable in pass_env and env.get(key_variable):
        env[key_variable] = route.stand_in(env[key_variable])
    config = _inline_config(env, pass_env)
    options = _options(config, provider)
    if config is not None and options is not None:
        options["baseURL"] = route.base_url
        key = options.get("apiKey")
        if isinstance(key, str) and key.startswith("{env:") and key.endswith("}"):
            name = key[5:-1]
            if env.get(name):
                env[name] = route.stand_in(env[name])
        elif isinstance(key, str) and key:
            options["apiKey"] = route.stand_in(key)
        env[_INLINE] = json.dumps(config, ensure_ascii=False)
    reach_gateway_directly(env)
