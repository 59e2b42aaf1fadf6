"""Each built-in host routes its trial through the gateway, or says why it cannot."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from stubcli import env_of
from test_host_claude import Trial as ClaudeTrial
from test_host_opencode import Trial as OpenCodeTrial

from atlante_eval.gateway.routes import STAND_IN_PREFIX, TrialRoute
from atlante_eval.hosts.routing import ANTHROPIC_API

KEY = "sk-ant-the-real-one-0123456789"


def _route() -> TrialRoute:
    return TrialRoute("http://127.0.0.1:4321", max_tokens=100)


@pytest.mark.parametrize(
    ("parent", "upstream"),
    [
        ({"ANTHROPIC_API_KEY": KEY}, ANTHROPIC_API),
        (
            {"ANTHROPIC_AUTH_TOKEN": KEY, "ANTHROPIC_BASE_URL": "https://corp/llm"},
            "https://corp/llm",
        ),
        ({"CLAUDE_CODE_OAUTH_TOKEN": KEY}, ANTHROPIC_API),
    ],
)
def test_claude_code_with_a_static_credential_is_routed(
    tmp_path: Path, parent: dict[str, str], upstream: str
) -> None:
    """API key, auth token or setup-token: the route as base URL, a stand-in for the key."""
    route = _route()
    trial = ClaudeTrial(tmp_path, parent={**parent, "HTTPS_PROXY": "http://proxy:3128"})
    trial.context = replace(trial.context, gateway=route)
    (Path(trial.parent["HOME"]) / ".claude").mkdir(parents=True)
    (Path(trial.parent["HOME"]) / ".claude" / ".credentials.json").write_text('{"t": "x"}')
    _end, _usage, call = trial.run()
    env = env_of(call)
    assert route.upstream == upstream
    assert env["ANTHROPIC_BASE_URL"] == route.base_url
    [name] = [n for n in parent if n != "ANTHROPIC_BASE_URL"]
    assert env[name].startswith(STAND_IN_PREFIX)
    assert route.substitute(env[name]) == KEY
    assert KEY not in json.dumps(env)
    assert "127.0.0.1" in env["NO_PROXY"].split(",")
    # Routed, no login file travels into the trial.
    assert not (trial.state / "claude-config" / ".credentials.json").exists()


@pytest.mark.parametrize(
    ("parent", "why"),
    [
        ({"CLAUDE_CODE_USE_BEDROCK": "1"}, "Bedrock"),
        ({"CLAUDE_CODE_USE_VERTEX": "1"}, "Vertex"),
        ({"CLAUDE_CODE_USE_FOUNDRY": "1"}, "Foundry"),
    ],
)
def test_claude_code_in_a_cloud_mode_is_declined(
    tmp_path: Path, parent: dict[str, str], why: str
) -> None:
    """A cloud mode signs requests for its own host: the route is declined, the env untouched."""
    route = _route()
    trial = ClaudeTrial(tmp_path, parent=parent)
    trial.context = replace(trial.context, gateway=route)
    _end, _usage, call = trial.run()
    assert not route.bound
    assert why in (route.declined or "")
    assert "ANTHROPIC_BASE_URL" not in env_of(call)


def test_claude_code_signed_in_with_auth_login_is_declined(tmp_path: Path) -> None:
    """A `claude auth login` session the host refreshes itself: declined, the file travels."""
    route = _route()
    trial = ClaudeTrial(tmp_path, parent={}, auth_status={"loggedIn": True})
    credentials = Path(trial.parent["HOME"]) / ".claude" / ".credentials.json"
    credentials.parent.mkdir(parents=True)
    credentials.write_text('{"claudeAiOauth": {"refreshToken": "r"}}')
    trial.context = replace(trial.context, gateway=route)
    trial.host.prepare(trial.context)
    assert not route.bound
    assert "auth login" in (route.declined or "")
    assert (trial.state / "claude-config" / ".credentials.json").exists()


def test_opencode_routes_its_provider_and_keeps_one_stand_in_key(tmp_path: Path) -> None:
    """V1, eval.model anthropic/...: its baseURL is the route; auth.json keeps one entry."""
    route = _route()
    trial = OpenCodeTrial(tmp_path, model="anthropic/claude-sonnet-4-5")
    auth = Path(trial.parent["XDG_DATA_HOME"]) / "opencode" / "auth.json"
    stored = {"anthropic": {"type": "api", "key": KEY}, "openai": {"type": "api", "key": "o-1"}}
    auth.write_text(json.dumps(stored))
    trial.context = replace(trial.context, gateway=route)
    trial.prepare()
    assert route.upstream == "https://api.anthropic.com/v1"
    assert trial.config()["provider"] == {"anthropic": {"options": {"baseURL": route.base_url}}}
    copied = json.loads((trial.state / "data" / "opencode" / "auth.json").read_text())
    assert list(copied) == ["anthropic"]
    assert copied["anthropic"]["key"].startswith(STAND_IN_PREFIX)
    assert route.substitute(copied["anthropic"]["key"]) == KEY


def test_opencode_without_a_known_provider_url_is_declined(tmp_path: Path) -> None:
    """acme is no built-in provider and no passed configuration gives its baseURL."""
    route = _route()
    trial = OpenCodeTrial(tmp_path)
    trial.context = replace(trial.context, gateway=route)
    trial.prepare()
    assert not route.bound
    assert "acme" in (route.declined or "")
    assert "provider" not in trial.config()


def test_opencode_passed_configuration_is_pointed_at_the_route(tmp_path: Path) -> None:
    """The passed OPENCODE_CONFIG_CONTENT's baseURL and apiKey variable become the route's."""
    inline = {
        "provider": {"acme": {"options": {"baseURL": "{env:ACME_URL}", "apiKey": "{env:ACME_KEY}"}}}
    }
    route = _route()
    trial = OpenCodeTrial(
        tmp_path,
        parent={
            "OPENCODE_CONFIG_CONTENT": json.dumps(inline),
            "ACME_URL": "https://acme.example/v1",
            "ACME_KEY": KEY,
        },
        pass_env=("OPENCODE_CONFIG_CONTENT", "ACME_URL", "ACME_KEY"),
    )
    trial.context = replace(trial.context, gateway=route)
    _end, _usage, call = trial.run()
    env = env_of(call)
    assert route.upstream == "https://acme.example/v1"
    options = json.loads(env["OPENCODE_CONFIG_CONTENT"])["provider"]["acme"]["options"]
    assert options["baseURL"] == route.base_url
    assert env["ACME_KEY"].startswith(STAND_IN_PREFIX)
    assert route.substitute(env["ACME_KEY"]) == KEY
    assert KEY not in json.dumps(env)


@pytest.mark.parametrize("kind", ["oauth", "wellknown"])
def test_opencode_signed_in_with_a_login_is_declined(tmp_path: Path, kind: str) -> None:
    """An OAuth or well-known login OpenCode refreshes itself stays as it is."""
    route = _route()
    trial = OpenCodeTrial(tmp_path, model="anthropic/claude-sonnet-4-5")
    auth = Path(trial.parent["XDG_DATA_HOME"]) / "opencode" / "auth.json"
    auth.write_text(json.dumps({"anthropic": {"type": kind, "access": "a", "refresh": "r"}}))
    trial.context = replace(trial.context, gateway=route)
    trial.prepare()
    assert not route.bound
    assert kind in (route.declined or "")
    copied = json.loads((trial.state / "data" / "opencode" / "auth.json").read_text())
    assert copied["anthropic"]["type"] == kind


def test_opencode_2_is_declined(tmp_path: Path) -> None:
    """V2 keeps its credentials in its database: not routed."""
    route = _route()
    trial = OpenCodeTrial(tmp_path, version="2.0.1")
    trial.context = replace(trial.context, gateway=route)
    trial.prepare()
    assert not route.bound
    assert "2.x" in (route.declined or "")
