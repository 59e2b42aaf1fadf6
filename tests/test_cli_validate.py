"""The validate, list and schema commands, driven through the typer app."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factory import (
    BAD_PROJECTS,
    BadProject,
    make_multi_project,
    make_pack,
    make_project,
    scenario,
    tree_listing,
)
from typer.testing import CliRunner, Result

from atlante_eval.cli import app
from atlante_eval.project.scenarios import MAX_TIMEOUT_MS, SCENARIO_SCHEMA_URI

BAD_IDS = [case.id for case in BAD_PROJECTS]


def _invoke(*args: str, cwd: Path | None = None) -> Result:
    """Run the CLI; assert it never printed a traceback and wrote nothing under ``cwd``."""
    before = tree_listing(cwd) if cwd else None
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    if cwd is not None:
        assert tree_listing(cwd) == before
    return result


def _at_line(case: BadProject) -> str | None:
    """The ``at:`` line the terminal format must show for ``case``, when fully known."""
    if case.source is None:
        return None
    where = case.source
    if case.location:
        where += f":{case.location[0]}:{case.location[1]}"
    if case.pointer:
        where += f" {case.pointer}"
    return f"at: {where}"


# --- validate ---------------------------------------------------------------------


def test_validate_accepts_a_multi_scenario_project_with_pack_suites(tmp_path: Path) -> None:
    """A valid project exits 0, prints a one-line summary and warns about unincluded packs."""
    root = make_multi_project(tmp_path / "p")
    result = _invoke("validate", str(root), cwd=tmp_path)
    assert result.exit_code == 0
    assert result.stdout == "ok: 5 scenarios valid for opencode; 1 native output file verified\n"
    assert result.stderr.startswith("warning [pack-scenario-not-included]: ")
    assert '"unincluded-one"' in result.stderr


def test_validate_json_on_success(tmp_path: Path) -> None:
    """``--format json`` prints ok, host, selected scenario names and warnings as JSON."""
    root = make_multi_project(tmp_path / "p", host="claude-code")
    result = _invoke("validate", str(root), "--format", "json", cwd=tmp_path)
    assert result.exit_code == 0
    assert result.stderr == ""
    output = json.loads(result.stdout)
    assert output["ok"] is True
    assert output["host"] == "claude-code"
    assert output["scenarios"] == ["local-a", "local-b", "local-c", "matching-one", "neutral-one"]
    [warning] = output["diagnostics"]
    assert warning["severity"] == "warning"
    assert warning["code"] == "pack-scenario-not-included"


def test_validate_accepts_the_configuration_file_and_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path may be atlante.jsonc itself, or omitted to use the current directory."""
    root = make_project(tmp_path / "p", scenarios=[scenario("only")])
    assert _invoke("validate", str(root / "atlante.jsonc"), cwd=tmp_path).exit_code == 0
    monkeypatch.chdir(root)
    result = _invoke("validate", cwd=tmp_path)
    assert result.exit_code == 0
    assert result.stdout.startswith("ok: 1 scenario valid for opencode")


@pytest.mark.parametrize("case", BAD_PROJECTS, ids=BAD_IDS)
def test_validate_reports_each_bad_input_and_exits_2(tmp_path: Path, case: BadProject) -> None:
    """Each broken project prints its diagnostic in the terminal format on stderr and exits 2."""
    target = case.build(tmp_path / "p")
    result = _invoke("validate", str(target), cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"error [{case.code}]: ")
    at_line = _at_line(case)
    if at_line is not None:
        assert lines[1] == at_line
    assert any(line.startswith(("next: ", "expected: ")) for line in lines)
    assert "\x1b[" not in result.stderr


@pytest.mark.parametrize("case", BAD_PROJECTS, ids=BAD_IDS)
def test_validate_json_reports_each_bad_input(tmp_path: Path, case: BadProject) -> None:
    """With ``--format json`` the diagnostics go to stdout as JSON: code, pointer, location."""
    target = case.build(tmp_path / "p")
    result = _invoke("validate", str(target), "--format", "json", cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr == ""
    output = json.loads(result.stdout)
    assert output["ok"] is False
    errors = [d for d in output["diagnostics"] if d["severity"] == "error"]
    assert len(errors) == 1
    [diagnostic] = errors
    assert diagnostic["code"] == case.code
    assert diagnostic.get("pointer") == case.pointer
    if case.location is not None:
        assert diagnostic["location"] == {"line": case.location[0], "column": case.location[1]}
    if case.source is not None:
        assert diagnostic["source"] == case.source
    assert set(diagnostic) <= {
        "severity",
        "code",
        "message",
        "source",
        "pointer",
        "location",
        "expected",
        "next",
        "cause",
    }


def test_validate_prints_every_diagnostic_separated_by_blank_lines(tmp_path: Path) -> None:
    """Several problems are all printed, sorted by source, each block followed by a blank line."""
    root = make_project(tmp_path / "p", scenarios=[scenario("Bad-A"), scenario("b", checks=[])])
    result = _invoke("validate", str(root), cwd=tmp_path)
    assert result.exit_code == 2
    blocks = result.stderr.split("\n\n")
    assert blocks[-1] == ""
    assert [block.splitlines()[1] for block in blocks[:-1]] == [
        "at: eval/scenarios/Bad-A.eval.json:4:3 /name",
        "at: eval/scenarios/b.eval.json:9:3 /checks",
    ]


def test_validate_rejects_an_unknown_format(tmp_path: Path) -> None:
    """An output format other than text or json is a usage error (exit 2)."""
    root = make_project(tmp_path / "p")
    result = _invoke("validate", str(root), "--format", "yaml", cwd=tmp_path)
    assert result.exit_code == 2
    assert "yaml" in result.stderr


# --- list -----------------------------------------------------------------------------


def test_list_prints_a_table_marking_unincluded_pack_scenarios(tmp_path: Path) -> None:
    """``list`` shows every discovered scenario with source, origin, agent and check types."""
    root = make_multi_project(tmp_path / "p")
    result = _invoke("list", str(root), cwd=tmp_path)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "SOURCE", "ORIGIN", "AGENT", "CHECKS"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert list(rows) == [
        "local-a",
        "local-b",
        "local-c",
        "matching-one",
        "neutral-one",
        "unincluded-one",
    ]
    assert "reviewer" in rows["local-b"]
    assert rows["local-c"].endswith("command, file-contains, diff-allowlist")
    assert "@acme/matching@2.1.0" in rows["matching-one"]
    assert "(not included)" in rows["unincluded-one"]
    assert "(not included)" not in rows["neutral-one"]
    assert "pack-scenario-not-included" in result.stderr


def test_list_json(tmp_path: Path) -> None:
    """``list --json`` prints one object per discovered scenario."""
    root = make_multi_project(tmp_path / "p")
    result = _invoke("list", str(root), "--json", cwd=tmp_path)
    assert result.exit_code == 0
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    by_name = {row["name"]: row for row in rows}
    assert by_name["local-a"] == {
        "name": "local-a",
        "source": "eval/scenarios/local-a.eval.json",
        "origin": "project",
        "agent": None,
        "checks": ["file-exists"],
        "included": True,
        "description": "First local scenario.",
    }
    assert by_name["unincluded-one"]["included"] is False
    assert by_name["unincluded-one"]["origin"] == "@acme/unincluded@1.0.0"


def test_list_does_not_need_a_build(tmp_path: Path) -> None:
    """``list`` skips native-output verification, so an unbuilt project lists fine."""
    root = make_project(tmp_path / "p", native=False)
    result = _invoke("list", str(root), "--json", cwd=tmp_path)
    assert result.exit_code == 0
    assert [row["name"] for row in json.loads(result.stdout)] == ["basic"]


@pytest.mark.parametrize(
    "case",
    [c for c in BAD_PROJECTS if c.code != "native-outputs-not-verified"],
    ids=[c.id for c in BAD_PROJECTS if c.code != "native-outputs-not-verified"],
)
def test_list_fails_like_validate_on_bad_input(tmp_path: Path, case: BadProject) -> None:
    """``list`` runs the same gates (except native outputs) and exits 2 with the diagnostic.

    With ``--json`` the diagnostics are in the JSON (with whatever scenarios are valid).
    """
    target = case.build(tmp_path / "p")
    result = _invoke("list", str(target), cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error [{case.code}]: ")
    result = _invoke("list", str(target), "--json", cwd=tmp_path)
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert case.code in [d["code"] for d in document["diagnostics"]]


def test_list_with_a_pack_that_only_warns(tmp_path: Path) -> None:
    """A selected pack whose suite is not included is listed, not an error."""
    root = make_project(tmp_path / "p", top_extra={"extends": ["@acme/p"]})
    make_pack(
        root,
        "@acme/p",
        eval_meta={"scenarios": "eval/scenarios/*.eval.json"},
        scenarios=[scenario("pack-only", fixture="eval/fixtures/pack-app")],
    )
    result = _invoke("list", str(root), cwd=tmp_path)
    assert result.exit_code == 0
    assert "pack-only (not included)" in result.stdout


# --- schema ---------------------------------------------------------------------------


def test_schema_scenario(tmp_path: Path) -> None:
    """``schema scenario`` prints the scenario JSON Schema with the v0.1 $id and limits."""
    result = _invoke("schema", "scenario", cwd=tmp_path)
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == SCENARIO_SCHEMA_URI
    assert set(schema["required"]) == {"$schema", "version", "name", "task", "checks"}
    assert schema["additionalProperties"] is False
    command = schema["$defs"]["CommandCheck"]
    assert command["properties"]["timeoutMs"]["maximum"] == MAX_TIMEOUT_MS
    assert schema["properties"]["checks"]["minItems"] == 1


def test_schema_config(tmp_path: Path) -> None:
    """``schema config`` prints the eval section schema and allows the build's other keys."""
    result = _invoke("schema", "config", cwd=tmp_path)
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["additionalProperties"] is True
    assert "eval" in schema["properties"]
    budget = schema["$defs"]["Budget"]["properties"]
    assert budget["trials"]["maximum"] == 50
    assert schema["$defs"]["EvalConfig"]["additionalProperties"] is False


def test_schema_unknown_kind(tmp_path: Path) -> None:
    """An unknown schema name is invalid-option with the accepted names, exit 2."""
    result = _invoke("schema", "manifest", cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error [invalid-option]: unknown schema 'manifest'")
    assert "expected: scenario, config, report" in result.stderr
    assert "next: run `atlante-eval schema scenario`" in result.stderr
