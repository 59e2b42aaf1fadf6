"""What a trial under ``os`` isolation may reach, and that the report says what it may not.

The allowed destinations really work (a loopback port forwarded into the
namespace, a plain HTTP request relayed by the proxy, a provider URL learnt from
the session's environment, setup reaching ``eval.network.allow``), command checks
never reach the network, and every refusal is recorded in the trial's ``denied``.
"""

from __future__ import annotations

import contextlib
import http.server
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario
from isolationkit import ATTACK_SCRIPT, listener, outcomes, require_bwrap
from standin import StandinHost, actions

from atlante_eval import RunReport, run_eval
from atlante_eval._util.endpoints import Endpoint, EndpointError, endpoints_in_env, parse_endpoint

HELLO = {"write": "hello.txt", "content": "hi\n"}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"served " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextlib.contextmanager
def http_server() -> Iterator[int]:
    """An HTTP server on 127.0.0.1 for the block; yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _project(tmp_path: Path, scenarios: list[dict[str, Any]], allow: list[str]) -> Path:
    return make_project(
        tmp_path / "project",
        scenarios=scenarios,
        eval_extra={"network": {"allow": allow}} if allow else None,
        fixtures={
            "eval/fixtures/app": {
                "README.md": "hello\n",
                "attack.py": ATTACK_SCRIPT.read_text(encoding="utf-8"),
            }
        },
    )


def _run(project: Path, **options: Any) -> RunReport:
    return anyio.run(
        lambda: run_eval(project, host=StandinHost(), isolation="os", trials=1, **options)
    )


def _check(*args: str) -> dict[str, Any]:
    return {"type": "command", "run": [sys.executable, "attack.py", "--attack", *args]}


def test_allowed_loopback_port_and_http_work_and_others_are_denied(tmp_path: Path) -> None:
    """An allowed 127.0.0.1 port works directly and through the proxy; others are denied."""
    require_bwrap()
    with http_server() as allowed, listener() as other:
        url = f"http://127.0.0.1:{allowed}/hello"
        scenarios = [
            scenario(
                "allowed",
                prompt=actions(
                    HELLO,
                    {"attack": "connect", "args": ["127.0.0.1", str(allowed)]},
                    {"attack": "fetch", "args": [url]},
                ),
                checks=[{"type": "file-exists", "path": "hello.txt"}, _check("fetch", url)],
            ),
            scenario(
                "other",
                prompt=actions(
                    HELLO, {"attack": "connect", "args": ["127.0.0.1", str(other.port)]}
                ),
            ),
        ]
        report = _run(_project(tmp_path, scenarios, [f"127.0.0.1:{allowed}"]), jobs=2)
        received = list(other.received)
    allowed_trial = report.scenarios["allowed"].trials[0]
    seen = outcomes(allowed_trial, agent_only=True)
    assert seen["connect"]["breached"] is True, seen
    assert seen["fetch"]["breached"] is True, seen["fetch"]
    assert seen["fetch"]["detail"] == "served /hello"
    assert allowed_trial.denied is None
    # The command check has no network even to an allowed destination.
    assert allowed_trial.checks is not None
    assert '"breached": false' in str(allowed_trial.checks[1].evidence["output"])
    other_trial = report.scenarios["other"].trials[0]
    assert outcomes(other_trial)["connect"]["breached"] is False
    assert received == []
    assert other_trial.denied is not None
    [denied] = other_trial.denied
    assert (denied.phase, denied.kind, denied.target, denied.count) == (
        "session",
        "network",
        f"127.0.0.1:{other.port}",
        1,
    )
    document = report.to_json()
    assert '"denied"' in document
    assert '"isolation": "os"' in document


def test_provider_url_in_the_session_env_is_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A *_BASE_URL the session receives is reachable without listing it."""
    require_bwrap()
    with http_server() as port:
        monkeypatch.setenv("MOCK_BASE_URL", f"http://127.0.0.1:{port}/v1")
        url = f"http://127.0.0.1:{port}/v1/models"
        scenarios = [
            scenario("provider", prompt=actions(HELLO, {"attack": "fetch", "args": [url]}))
        ]
        report = _run(_project(tmp_path, scenarios, []), pass_env=["MOCK_BASE_URL"])
    trial = report.scenarios["provider"].trials[0]
    assert outcomes(trial)["fetch"]["breached"] is True, outcomes(trial)
    assert trial.verdict == "pass"


class _DeclaringHost(StandinHost):
    """A stand-in that declares model endpoints, as each built-in host does."""

    def __init__(self, endpoints: tuple[Endpoint, ...]) -> None:
        super().__init__()
        self.model_endpoints = endpoints


def test_the_hosts_declared_model_endpoints_are_reachable(tmp_path: Path) -> None:
    """The session reaches the endpoints its host declares; without them, the same is denied."""
    require_bwrap()
    with http_server() as port:
        connect = {"attack": "connect", "args": ["127.0.0.1", str(port)]}
        scenarios = [scenario("model", prompt=actions(HELLO, connect))]

        def run(endpoints: tuple[Endpoint, ...], name: str) -> RunReport:
            project = _project(tmp_path / name, scenarios, [])
            host = _DeclaringHost(endpoints)
            return anyio.run(lambda: run_eval(project, host=host, isolation="os", trials=1))

        [reached] = run((Endpoint("127.0.0.1", port),), "declared").scenarios["model"].trials
        [refused] = run((), "undeclared").scenarios["model"].trials
    assert outcomes(reached)["connect"]["breached"] is True, outcomes(reached)
    assert reached.denied is None
    assert outcomes(refused)["connect"]["breached"] is False, outcomes(refused)
    assert [(d.phase, d.target) for d in refused.denied or []] == [("session", f"127.0.0.1:{port}")]


def test_setup_reaches_the_allow_list_only(tmp_path: Path) -> None:
    """Setup may reach eval.network.allow; a destination off it is denied (phase setup)."""
    require_bwrap()
    with http_server() as allowed, listener() as other:
        fetch = [sys.executable, "attack.py", "--attack", "fetch", f"http://127.0.0.1:{allowed}/s"]
        probe = [sys.executable, "attack.py", "--attack", "connect", "127.0.0.1", str(other.port)]
        scenarios = [
            scenario(
                "fetching",
                prompt=actions(HELLO),
                checks=[
                    {"type": "file-contains", "path": "attack-fetch.json", "pattern": "served /s"}
                ],
                setup=fetch,
            ),
            scenario(
                "probing",
                prompt=actions(HELLO),
                checks=[
                    {
                        "type": "file-contains",
                        "path": "attack-connect.json",
                        "pattern": '"breached": false',
                    }
                ],
                setup=probe,
            ),
        ]
        report = _run(_project(tmp_path, scenarios, [f"127.0.0.1:{allowed}"]), jobs=2)
        received = list(other.received)
    assert report.scenarios["fetching"].trials[0].verdict == "pass"
    probing = report.scenarios["probing"].trials[0]
    assert probing.verdict == "pass", probing
    assert received == []
    assert [(d.phase, d.target) for d in probing.denied or []] == [
        ("setup", f"127.0.0.1:{other.port}")
    ]


def test_setup_without_an_allow_list_has_no_network(tmp_path: Path) -> None:
    """With eval.network.allow empty, setup reaches nothing, not even the model's endpoints."""
    require_bwrap()
    with listener() as server:
        probe = [sys.executable, "attack.py", "--attack", "connect", "127.0.0.1", str(server.port)]
        scenarios = [
            scenario(
                "offline",
                prompt=actions(HELLO),
                checks=[
                    {
                        "type": "file-contains",
                        "path": "attack-connect.json",
                        "pattern": '"breached": false',
                    }
                ],
                setup=probe,
            )
        ]
        report = _run(_project(tmp_path, scenarios, []))
        received = list(server.received)
    assert report.scenarios["offline"].trials[0].verdict == "pass"
    assert received == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("api.example.com", Endpoint("api.example.com", 443)),
        ("API.Example.com:8443", Endpoint("api.example.com", 8443)),
        ("127.0.0.1:8080", Endpoint("127.0.0.1", 8080)),
        ("[::1]:9000", Endpoint("::1", 9000)),
        ("https://x.test/v1", Endpoint("x.test", 443)),
        ("http://x.test:81/", Endpoint("x.test", 81)),
    ],
)
def test_parse_endpoint(text: str, expected: Endpoint) -> None:
    """Allow-list entries: host, host:port, [v6]:port, URLs."""
    assert parse_endpoint(text) == expected


@pytest.mark.parametrize("text", ["", "host:0", "host:70000", "a b:1", "ftp://x/", "::1", "[::1"])
def test_parse_endpoint_refuses(text: str) -> None:
    """Entries naming no host:port are refused."""
    with pytest.raises(EndpointError):
        parse_endpoint(text)


def test_endpoints_in_env() -> None:
    """*_BASE_URL variables and OpenCode provider baseURLs (with {env:...}) are found."""
    env = {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:4000",
        "MOCK_URL": "http://127.0.0.1:5000",
        "OPENCODE_CONFIG_CONTENT": (
            '{"provider": {"a": {"options": {"baseURL": "{env:MOCK_URL}"}},'
            ' "b": {"options": {"baseURL": "https://llm.test/v1"}}}}'
        ),
        "OTHER_BASE_URL": "not a url",
    }
    assert endpoints_in_env(env) == [
        Endpoint("127.0.0.1", 4000),
        Endpoint("127.0.0.1", 5000),
        Endpoint("llm.test", 443),
    ]
