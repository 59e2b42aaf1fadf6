"""Finding and loading the project configuration and validating its eval section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factory import SCHEMA_V01, SCHEMA_V02, make_project, tree_listing, write_json, write_text

from atlante_eval.diagnostics import Diagnostic, DiagnosticError
from atlante_eval.project import find_config
from atlante_eval.project.config import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TIMEOUT_MS,
    DEFAULT_TRIALS,
    load_project,
)


def _failure(path: Path) -> Diagnostic:
    """Load ``path``, expect exactly one error diagnostic with exit code 2, and return it."""
    before = tree_listing(path) if path.is_dir() else None
    with pytest.raises(DiagnosticError) as caught:
        load_project(path)
    assert caught.value.exit_code == 2
    assert len(caught.value.diagnostics) == 1, caught.value.diagnostics
    if before is not None:
        assert tree_listing(path) == before
    return caught.value.diagnostics[0]


def _failures(path: Path) -> list[Diagnostic]:
    with pytest.raises(DiagnosticError) as caught:
        load_project(path)
    assert caught.value.exit_code == 2
    return list(caught.value.diagnostics)


def _write_config(root: Path, body: dict[str, Any], name: str = "atlante.jsonc") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return write_json(root / name, body)


def _with_eval(eval_section: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"$schema": SCHEMA_V01, "eval": eval_section, **top}


# --- finding the configuration ----------------------------------------------------


def test_valid_project_loads_with_budget_defaults(tmp_path: Path) -> None:
    """A minimal eval section loads; absent budget fields take the documented defaults."""
    root = make_project(tmp_path / "p")
    project = load_project(root)
    assert project.root == root.absolute()
    assert project.source == "atlante.jsonc"
    assert project.schema_version == "0.1"
    assert project.eval.host == "opencode"
    budget = project.eval.budget
    assert (budget.trials, budget.timeout_ms, budget.max_sessions, budget.max_tokens) == (
        DEFAULT_TRIALS,
        DEFAULT_TIMEOUT_MS,
        DEFAULT_MAX_SESSIONS,
        DEFAULT_MAX_TOKENS,
    )
    assert (DEFAULT_TRIALS, DEFAULT_TIMEOUT_MS, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_TOKENS) == (
        3,
        600_000,
        15,
        400_000,
    )


def test_explicit_configuration_file_is_accepted(tmp_path: Path) -> None:
    """Passing atlante.json itself loads it, and its directory becomes the project root."""
    root = make_project(tmp_path / "p", config_name="atlante.json")
    project = load_project(root / "atlante.json")
    assert project.config_path == (root / "atlante.json").absolute()
    assert project.root == root.absolute()


def test_budget_fields_are_read_in_camel_case(tmp_path: Path) -> None:
    """Authored budget values replace the defaults field by field."""
    root = make_project(
        tmp_path / "p",
        eval_extra={"model": "acme/m", "budget": {"trials": 50, "timeoutMs": 3_600_000}},
    )
    config = load_project(root).eval
    assert config.model == "acme/m"
    assert (config.budget.trials, config.budget.timeout_ms) == (50, 3_600_000)
    assert config.budget.max_sessions == DEFAULT_MAX_SESSIONS


def test_keys_outside_eval_belong_to_the_build_and_are_ignored(tmp_path: Path) -> None:
    """Unknown top-level keys (agents, options, ...) do not fail eval validation."""
    root = make_project(tmp_path / "p", top_extra={"options": {"anything": True}, "values": 1})
    assert load_project(root).eval.host == "opencode"


def test_missing_configuration_is_eval_not_configured(tmp_path: Path) -> None:
    """A directory without atlante.jsonc or atlante.json fails with eval-not-configured."""
    (tmp_path / "empty").mkdir()
    diagnostic = _failure(tmp_path / "empty")
    assert diagnostic.code == "eval-not-configured"
    assert "no Atlante configuration found" in diagnostic.message
    assert diagnostic.next


def test_nonexistent_path_is_eval_not_configured(tmp_path: Path) -> None:
    """A path that does not exist fails with eval-not-configured, not an OS error."""
    with pytest.raises(DiagnosticError) as caught:
        find_config(tmp_path / "nowhere")
    assert [d.code for d in caught.value.diagnostics] == ["eval-not-configured"]


def test_both_configuration_files_are_ambiguous(tmp_path: Path) -> None:
    """atlante.jsonc next to atlante.json fails with ambiguous-config instead of choosing."""
    root = make_project(tmp_path / "p")
    write_json(root / "atlante.json", {"$schema": SCHEMA_V01})
    diagnostic = _failure(root)
    assert diagnostic.code == "ambiguous-config"
    assert diagnostic.next


def test_missing_eval_section_is_eval_not_configured(tmp_path: Path) -> None:
    """A valid document without an eval section (or with eval null) is eval-not-configured."""
    _write_config(tmp_path / "a", {"$schema": SCHEMA_V01, "agents": {}})
    _write_config(tmp_path / "b", {"$schema": SCHEMA_V01, "eval": None})
    for name in ("a", "b"):
        diagnostic = _failure(tmp_path / name)
        assert diagnostic.code == "eval-not-configured"
        assert diagnostic.message == "the configuration has no eval section"
        assert diagnostic.source == "atlante.jsonc"


# --- reading and parsing ------------------------------------------------------------


def test_malformed_jsonc_reports_line_and_column(tmp_path: Path) -> None:
    """A syntax error in atlante.jsonc is malformed-jsonc at the exact line and column."""
    write_text(
        tmp_path / "p" / "atlante.jsonc",
        '{\n  // comment\n  "$schema": "x",\n  "eval": {"host": "opencode",,}\n}\n',
    )
    diagnostic = _failure(tmp_path / "p")
    assert diagnostic.code == "malformed-jsonc"
    assert diagnostic.message.startswith("malformed JSONC")
    assert diagnostic.source == "atlante.jsonc"
    assert diagnostic.location is not None
    assert (diagnostic.location.line, diagnostic.location.column) == (4, 32)


def test_comment_in_strict_json_config_is_malformed(tmp_path: Path) -> None:
    """atlante.json is strict JSON: a comment fails at its position with a hint about .jsonc."""
    write_text(tmp_path / "p" / "atlante.json", '{\n  "$schema": "x" // no\n}\n')
    diagnostic = _failure(tmp_path / "p")
    assert diagnostic.code == "malformed-jsonc"
    assert "comments are not allowed" in diagnostic.message
    assert diagnostic.location is not None
    assert (diagnostic.location.line, diagnostic.location.column) == (2, 18)


@pytest.mark.parametrize(
    ("content", "code", "fragment"),
    [
        (b"", "malformed-jsonc", "the document is empty"),
        (b"  \n", "malformed-jsonc", "the document is empty"),
        (b'{"$schema": "\xff"}', "config-unreadable", "not valid UTF-8"),
        (b" " * (1024 * 1024 + 1), "config-unreadable", "larger than the 1048576-byte limit"),
        (b"[]", "invalid-document", "must be a JSON object, not an array"),
        (b'"text"', "invalid-document", "must be a JSON object, not a string"),
    ],
)
def test_unusable_configuration_files(
    tmp_path: Path, content: bytes, code: str, fragment: str
) -> None:
    """Empty, non-UTF-8, oversized and non-object configurations each get their diagnostic."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "atlante.jsonc").write_bytes(content)
    diagnostic = _failure(tmp_path / "p")
    assert diagnostic.code == code
    assert fragment in diagnostic.message
    assert diagnostic.source == "atlante.jsonc"
    assert diagnostic.next


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ("https://atlante.sh/schema/v9/schema.json", "unsupported configuration $schema"),
        (5, "unsupported configuration $schema 5"),
        (None, "the configuration has no $schema"),
    ],
)
def test_wrong_schema_is_unsupported_schema(tmp_path: Path, schema: Any, fragment: str) -> None:
    """A missing or unknown $schema is unsupported-schema at /$schema, listing the valid URIs."""
    body: dict[str, Any] = {"eval": {"host": "opencode", "scenarios": "x"}}
    if schema is not None:
        body = {"$schema": schema, **body}
    _write_config(tmp_path / "p", body)
    diagnostic = _failure(tmp_path / "p")
    assert diagnostic.code == "unsupported-schema"
    assert fragment in diagnostic.message
    assert diagnostic.pointer == "/$schema"
    assert diagnostic.expected is not None
    assert SCHEMA_V01 in diagnostic.expected
    assert SCHEMA_V02 in diagnostic.expected
    if schema is not None:
        assert diagnostic.location is not None
        assert diagnostic.location.line == 2


# --- the eval section -------------------------------------------------------------


def test_unknown_keys_in_eval_and_budget_are_reported_each(tmp_path: Path) -> None:
    """Every unrecognized key in eval and eval.budget is its own invalid-document diagnostic."""
    root = make_project(
        tmp_path / "p", eval_extra={"retries": 2, "budget": {"trials": 2, "maxCost": 1}}
    )
    diagnostics = _failures(root)
    found = {(d.code, d.pointer, d.message) for d in diagnostics}
    assert found == {
        ("invalid-document", "/eval/retries", 'unrecognized property "retries"'),
        ("invalid-document", "/eval/budget/maxCost", 'unrecognized property "maxCost"'),
    }
    text = (root / "atlante.jsonc").read_text(encoding="utf-8").splitlines()
    for diagnostic in diagnostics:
        assert diagnostic.location is not None
        key = diagnostic.pointer.rsplit("/", 1)[-1] if diagnostic.pointer else ""
        line = text[diagnostic.location.line - 1]
        assert line[diagnostic.location.column - 1 :].startswith(f'"{key}"')


@pytest.mark.parametrize(
    ("budget", "pointer", "fragment"),
    [
        ({"trials": 0}, "/eval/budget/trials", "greater than or equal to 1 (got 0)"),
        ({"trials": 51}, "/eval/budget/trials", "less than or equal to 50 (got 51)"),
        ({"trials": 2.5}, "/eval/budget/trials", "must be a valid integer"),
        ({"trials": "3"}, "/eval/budget/trials", "must be a valid integer"),
        ({"trials": True}, "/eval/budget/trials", "must be a valid integer"),
        ({"timeoutMs": 3_600_001}, "/eval/budget/timeoutMs", "less than or equal to 3600000"),
        ({"timeoutMs": 0}, "/eval/budget/timeoutMs", "greater than or equal to 1"),
        ({"maxSessions": 0}, "/eval/budget/maxSessions", "greater than or equal to 1"),
        ({"maxTokens": -1}, "/eval/budget/maxTokens", "greater than or equal to 1"),
    ],
)
def test_budget_limits(tmp_path: Path, budget: dict[str, Any], pointer: str, fragment: str) -> None:
    """Budget values outside their range or type fail at their own pointer and line."""
    root = make_project(tmp_path / "p", eval_extra={"budget": budget})
    diagnostic = _failure(root)
    assert diagnostic.code == "invalid-document"
    assert diagnostic.pointer == pointer
    assert fragment in diagnostic.message
    assert diagnostic.location is not None
    assert diagnostic.next is not None
    assert "docs/configuration.md" in diagnostic.next


def test_v01_admits_only_opencode_as_eval_host(tmp_path: Path) -> None:
    """A v0.1 document with eval.host claude-code fails at /eval/host."""
    _write_config(tmp_path / "p", _with_eval({"host": "claude-code", "scenarios": "x"}))
    diagnostic = _failure(tmp_path / "p")
    assert diagnostic.code == "invalid-document"
    assert diagnostic.pointer == "/eval/host"
    assert 'v0.1 documents admit only "opencode"' in diagnostic.message


def test_v01_admits_only_opencode_in_hosts(tmp_path: Path) -> None:
    """A v0.1 document listing claude-code in hosts fails at /hosts."""
    body = _with_eval({"host": "opencode", "scenarios": "x"}, hosts=["opencode", "claude-code"])
    _write_config(tmp_path / "p", body)
    diagnostic = _failure(tmp_path / "p")
    assert (diagnostic.code, diagnostic.pointer) == ("invalid-document", "/hosts")


def test_v02_admits_claude_code(tmp_path: Path) -> None:
    """A v0.2 document may select claude-code when hosts lists it."""
    root = make_project(tmp_path / "p", host="claude-code")
    project = load_project(root)
    assert (project.schema_version, project.eval.host) == ("0.2", "claude-code")


def test_unknown_host_name_is_invalid(tmp_path: Path) -> None:
    """A host that is neither opencode nor claude-code fails with the accepted names."""
    body = {"$schema": SCHEMA_V02, "eval": {"host": "cursor", "scenarios": "x"}}
    _write_config(tmp_path / "p", body)
    diagnostic = _failure(tmp_path / "p")
    assert diagnostic.pointer == "/eval/host"
    assert "'opencode' or 'claude-code'" in diagnostic.message


def test_eval_host_must_be_materialized(tmp_path: Path) -> None:
    """eval.host missing from hosts (default ["opencode"]) is eval-host-not-materialized."""
    body = {"$schema": SCHEMA_V02, "eval": {"host": "claude-code", "scenarios": "x"}}
    _write_config(tmp_path / "p", body)
    diagnostic = _failure(tmp_path / "p")
    assert diagnostic.code == "eval-host-not-materialized"
    assert diagnostic.pointer == "/eval/host"
    assert diagnostic.location is not None
    assert diagnostic.next is not None
    assert "atlante build" in diagnostic.next


def test_eval_needs_scenarios_or_include(tmp_path: Path) -> None:
    """An eval section with neither scenarios nor include fails at /eval."""
    _write_config(tmp_path / "p", _with_eval({"host": "opencode"}))
    diagnostic = _failure(tmp_path / "p")
    assert (diagnostic.code, diagnostic.pointer) == ("invalid-document", "/eval")
    assert '"scenarios", "include", or both' in diagnostic.message


@pytest.mark.parametrize(
    ("section", "pointer", "fragment"),
    [
        ({"scenarios": ""}, "/eval/scenarios", "must not be empty"),
        ({"scenarios": 5}, "/eval/scenarios", "must be a valid string"),
        ({"include": []}, "/eval/include", "must have at least 1 item"),
        ({"include": [""]}, "/eval/include/0", "must not be empty"),
        ({"include": ["@a/b", "@a/b"]}, "/eval/include", "must not contain duplicate locators"),
        ({"scenarios": "x", "model": ""}, "/eval/model", "must not be empty"),
    ],
)
def test_eval_field_constraints(
    tmp_path: Path, section: dict[str, Any], pointer: str, fragment: str
) -> None:
    """Empty strings, empty include lists and duplicate locators fail at their pointer."""
    _write_config(tmp_path / "p", _with_eval({"host": "opencode", **section}))
    diagnostic = _failure(tmp_path / "p")
    assert (diagnostic.code, diagnostic.pointer) == ("invalid-document", pointer)
    assert fragment in diagnostic.message


@pytest.mark.parametrize(
    ("extends", "expected"),
    [
        (5, [("/extends", '"extends" must be a valid string or a valid list (got 5)')]),
        ([], [("/extends", '"extends" must have at least 1 item')]),
        (
            ["", 5],
            [
                ("/extends/0", '"extends" item 0 must not be empty'),
                ("/extends/1", '"extends" item 1 must be a valid string (got 5)'),
            ],
        ),
    ],
)
def test_extends_union_errors_name_the_intended_shape(
    tmp_path: Path, extends: Any, expected: list[tuple[str, str]]
) -> None:
    """Errors in extends (string or array) point into the document, never at pydantic tags."""
    body = _with_eval({"host": "opencode", "scenarios": "x"}, extends=extends)
    _write_config(tmp_path / "p", body)
    found = sorted((d.pointer or "", d.message) for d in _failures(tmp_path / "p"))
    assert found == expected


def test_duplicate_hosts_are_invalid(tmp_path: Path) -> None:
    """hosts must not repeat a host."""
    body = {
        "$schema": SCHEMA_V02,
        "hosts": ["opencode", "opencode"],
        "eval": {"host": "opencode", "scenarios": "x"},
    }
    _write_config(tmp_path / "p", body)
    diagnostic = _failure(tmp_path / "p")
    assert (diagnostic.pointer, diagnostic.message) == (
        "/hosts",
        "hosts must not contain duplicates",
    )


def test_duplicate_key_in_configuration_is_malformed(tmp_path: Path) -> None:
    """A repeated key in the configuration is a parse error at the second key."""
    write_text(
        tmp_path / "p" / "atlante.jsonc",
        json.dumps({"$schema": SCHEMA_V01})[:-1] + ', "$schema": "x"}',
    )
    diagnostic = _failure(tmp_path / "p")
    assert diagnostic.code == "malformed-jsonc"
    assert diagnostic.message.endswith('duplicate key "$schema"')
