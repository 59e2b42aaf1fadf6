"""The environment allowlist, proxy credential stripping and the hardened git environment."""

from __future__ import annotations

import os

import pytest

from atlante_eval._util.environment import ALLOWED_ENV, allowed_env, git_env, sanitize_proxy

PARENT = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/someone",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TMPDIR": "/tmp/x",
    "ANTHROPIC_API_KEY": "sk-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "GITHUB_TOKEN": "ghp-secret",
    "OPENCODE_CONFIG": "/home/someone/.config/opencode.json",
    "GIT_DIR": "/elsewhere/.git",
    "PYTHONPATH": "/inject",
}


def test_allowlist_keeps_only_the_listed_variables() -> None:
    """Only PATH, HOME, LANG, LC_ALL, TMPDIR and the proxy variables pass."""
    env = allowed_env(PARENT)
    assert env == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/someone",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": "/tmp/x",
    }


def test_allowlist_is_the_reference_list() -> None:
    """The allowlist is exactly the reference's eleven names."""
    assert set(ALLOWED_ENV) == {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
    }


def test_missing_variables_are_not_invented() -> None:
    """Variables absent from the parent stay absent (no empty strings)."""
    assert allowed_env({"PATH": "/bin"}) == {"PATH": "/bin"}


def test_allowlist_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a base mapping the live os.environ is filtered."""
    monkeypatch.setenv("ATLANTE_ENV_SECRET", "nope")
    monkeypatch.setenv("LANG", "C.UTF-8")
    env = allowed_env()
    assert "ATLANTE_ENV_SECRET" not in env
    assert env["LANG"] == "C.UTF-8"
    assert env.get("PATH") == os.environ.get("PATH")


def test_extra_names_pass_verbatim() -> None:
    """Names given in ``extra`` (--pass-env) pass unchanged when present."""
    env = allowed_env(PARENT, extra=["ANTHROPIC_API_KEY", "NOT_SET"])
    assert env["ANTHROPIC_API_KEY"] == "sk-secret"
    assert "NOT_SET" not in env
    assert "GITHUB_TOKEN" not in env


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://user:pw@example.test:8443", "https://example.test:8443/"),
        ("http://user@proxy.test:3128/", "http://proxy.test:3128/"),
        ("http://:secret@proxy.test", "http://proxy.test/"),
        ("http://proxy.test:8080/path?q=1", "http://proxy.test:8080/path?q=1"),
        ("http://PROXY.Example.TEST", "http://proxy.example.test/"),
        ("http://u:p@[::1]:3128", "http://[::1]:3128/"),
        ("socks5://u:p@socks.test:1080", "socks5://socks.test:1080/"),
    ],
)
def test_proxy_credentials_are_stripped(value: str, expected: str) -> None:
    """User name and password are removed; the serialised URL gains a trailing slash."""
    assert sanitize_proxy(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "user:pw@proxy.test:3128",
        "proxy.test:3128",
        "localhost:3128",
        "",
        "http://",
        "http://user:pw@",
        "http://proxy.test:notaport",
        "not a url",
    ],
)
def test_scheme_less_or_host_less_proxies_are_dropped(value: str) -> None:
    """Values without a scheme and host, or unparseable ones, are dropped."""
    assert sanitize_proxy(value) is None


def test_proxy_variables_are_sanitised_and_no_proxy_is_verbatim() -> None:
    """All four proxy variables are cleaned; NO_PROXY and no_proxy pass verbatim."""
    parent = {
        "HTTPS_PROXY": "https://user:pw@example.test:8443",
        "https_proxy": "https://user:pw@example.test:8443",
        "HTTP_PROXY": "user:pw@proxy.test:3128",
        "http_proxy": "http://a:b@lower.test",
        "NO_PROXY": "localhost,.internal, 10.0.0.0/8 ,user:pw@x",
        "no_proxy": "*",
    }
    env = allowed_env(parent)
    assert env == {
        "HTTPS_PROXY": "https://example.test:8443/",
        "https_proxy": "https://example.test:8443/",
        "http_proxy": "http://lower.test/",
        "NO_PROXY": "localhost,.internal, 10.0.0.0/8 ,user:pw@x",
        "no_proxy": "*",
    }
    assert all("pw" not in value for key, value in env.items() if "NO" not in key.upper())


def test_git_env_ignores_user_and_system_configuration() -> None:
    """git_env is the allowlist plus settings that disable global and system git config."""
    env = git_env(PARENT)
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_OPTIONAL_LOCKS"] == "0"
    assert env["LC_ALL"] == "C"
    assert env["HOME"] == "/home/someone"
    assert "GIT_DIR" not in env
    assert "ANTHROPIC_API_KEY" not in env
    assert "PYTHONPATH" not in env


def test_git_env_drops_git_variables_that_redirect_repositories() -> None:
    """GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE and GIT_CONFIG_* from the parent never pass."""
    parent = {
        "PATH": "/bin",
        "GIT_DIR": "/x",
        "GIT_WORK_TREE": "/y",
        "GIT_INDEX_FILE": "/z",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": "/evil",
        "GIT_EXTERNAL_DIFF": "/evil",
    }
    env = git_env(parent)
    assert not [name for name in env if name.startswith("GIT_") and name not in _GIT_OWN]


_GIT_OWN = {
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_GLOBAL",
    "GIT_ATTR_NOSYSTEM",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_TERMINAL_PROMPT",
    "GIT_OPTIONAL_LOCKS",
}
