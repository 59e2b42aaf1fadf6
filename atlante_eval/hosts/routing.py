"""Point a built-in host at the trial's gateway route, or say why it cannot be.

With the gateway on, each trial's :class:`~atlante_eval.hosts.base.ModelRoute`
reaches the host on its context. What each host does with it (docs/gateway.md,
"Credentials"):

* **Claude Code** with an API key or a static token in its environment
  (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, ``CLAUDE_CODE_OAUTH_TOKEN`` from
  ``claude setup-token``): ``ANTHROPIC_BASE_URL`` becomes the route, each credential
  variable a stand-in token; the route forwards to the user's ``ANTHROPIC_BASE_URL``
  or ``https://api.anthropic.com``. A ``claude auth login`` session (a credentials
  file Claude Code refreshes itself) and the Bedrock, Vertex and Foundry modes (whose
  requests are signed for their own host) are declined.
* **OpenCode** (V1) with ``eval.model`` naming the provider: the provider's
  ``baseURL`` in the authored configuration (or in the ``OPENCODE_CONFIG_CONTENT``
  the user passed, which OpenCode merges over it) becomes the route; the provider's
  ``auth.json`` API key becomes a stand-in token and the file keeps no other
  provider's entry (:mod:`.opencode_routing`).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from .base import ModelRoute
from .credentials import ClaudeAuthMode

__all__ = [
    "ANTHROPIC_API",
    "CLAUDE_ROUTED_CREDENTIALS",
    "claude_route",
    "claude_routed_env",
    "reach_gateway_directly",
]

#: Where Claude Code's model calls go when ``ANTHROPIC_BASE_URL`` is not set.
ANTHROPIC_API = "https://api.anthropic.com"
#: The Claude Code credential variables the gateway replaces with stand-in tokens.
CLAUDE_ROUTED_CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")

_CLAUDE_DECLINED: Mapping[ClaudeAuthMode, str] = {
    "auth-status": "Claude Code is signed in with `claude auth login`, a session it refreshes "
    "itself from its credentials file, so that file stays in the sandbox and the host calls "
    "its provider directly",
    "bedrock": "Claude Code's Bedrock mode signs each request for AWS's own host",
    "vertex": "Claude Code's Vertex mode signs each request for Google's own host",
    "foundry": "Claude Code's Foundry mode authenticates with Azure's own host",
}
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY")
_LOOPBACK = ("127.0.0.1", "localhost")


def claude_route(route: ModelRoute, mode: ClaudeAuthMode | None, parent: Mapping[str, str]) -> None:
    """Bind the route to Claude Code's provider, or decline it for ``mode``."""
    if mode in ("api-key", "oauth"):
        upstream = (parent.get("ANTHROPIC_BASE_URL") or "").strip() or ANTHROPIC_API
        route.bind(upstream)
    else:
        route.decline(
            _CLAUDE_DECLINED.get(mode, "Claude Code's credentials are unknown")
            if mode
            else "Claude Code was not probed"
        )


def claude_routed_env(env: MutableMapping[str, str], route: ModelRoute) -> None:
    """Point a Claude Code session's environment at a bound route."""
    env["ANTHROPIC_BASE_URL"] = route.base_url
    for name in CLAUDE_ROUTED_CREDENTIALS:
        value = env.get(name)
        if value and value.strip():
            env[name] = route.stand_in(value)
    reach_gateway_directly(env)


def reach_gateway_directly(env: MutableMapping[str, str]) -> None:
    """Keep the session's calls to the gateway off the user's HTTP proxy (``NO_PROXY``)."""
    if not any(env.get(name) for name in _PROXY_VARIABLES):
        return
    for name in ("NO_PROXY", "no_proxy"):
        present = [p.strip() for p in env.get(name, "").split(",") if p.strip()]
        env[name] = ",".join([*present, *(h for h in _LOOPBACK if h not in present)])
