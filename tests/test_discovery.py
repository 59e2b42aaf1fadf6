"""Scenario discovery: glob expansion, parsing, schema validation, names and fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factory import SCENARIO_URI, CheckDoc, scenario, tree_listing, write_json, write_text
from unprivileged import give_to_nobody, nobody_workspace, python_as_nobody

from atlante_eval.diagnostics import Diagnostic
from atlante_eval.project import CommandCheck, FileContainsCheck
from atlante_eval.project.discovery import (
    Discovery,
    discover_scenarios,
    fixture_problem,
    glob_files,
)
from atlante_eval.project.scenarios import CHECK_TIMEOUT_DEFAULT_MS, Origin


def _root(tmp_path: Path) -> Path:
    """Return a project root with one valid fixture, eval/fixtures/app."""
    root = tmp_path / "root"
    write_text(root / "eval" / "fixtures" / "app" / "README.md", "hello\n")
    return root


def _discover(root: Path, pattern: str = "eval/scenarios/*.eval.json*") -> Discovery:
    before = tree_listing(root)
    found = discover_scenarios(root, pattern, origin=Origin(kind="project", root=root))
    assert tree_listing(root) == before
    return found


def _only(found: Discovery) -> Diagnostic:
    assert found.scenarios == ()
    assert len(found.diagnostics) == 1, found.diagnostics
    return found.diagnostics[0]


def _write_scenario(root: Path, name: str, document: Any) -> Path:
    path = root / "eval" / "scenarios" / name
    if isinstance(document, str):
        return write_text(path, document)
    return write_json(path, document)


def _files(root: Path, *paths: str) -> None:
    for path in paths:
        write_text(root / path, "{}")


# --- glob semantics -------------------------------------------------------------


def test_star_stays_inside_one_segment(tmp_path: Path) -> None:
    """``*`` matches within a directory level but never crosses ``/``."""
    _files(tmp_path, "eval/a.json", "eval/sub/b.json")
    assert glob_files(tmp_path, "eval/*.json") == ["eval/a.json"]


def test_globstar_spans_zero_or_more_directories(tmp_path: Path) -> None:
    """``**/`` matches zero or more whole directory levels."""
    _files(tmp_path, "eval/a.json", "eval/x/b.json", "eval/x/y/c.json", "other/d.json")
    assert glob_files(tmp_path, "eval/**/*.json") == [
        "eval/a.json",
        "eval/x/b.json",
        "eval/x/y/c.json",
    ]
    assert glob_files(tmp_path, "**/d.json") == ["other/d.json"]


def test_trailing_globstar_matches_every_file_below(tmp_path: Path) -> None:
    """A trailing ``**`` matches every file under the directory (unlike the reference)."""
    _files(tmp_path, "eval/a.json", "eval/x/b.json")
    assert glob_files(tmp_path, "eval/**") == ["eval/a.json", "eval/x/b.json"]


def test_question_mark_classes_and_braces(tmp_path: Path) -> None:
    """``?`` is one character; ``[...]`` and ``[!...]`` are classes; braces expand."""
    _files(tmp_path, "s/a.json", "s/b.json", "s/ab.json", "s/c.jsonc", "s/7.json")
    assert glob_files(tmp_path, "s/?.json") == ["s/7.json", "s/a.json", "s/b.json"]
    assert glob_files(tmp_path, "s/[ab].json") == ["s/a.json", "s/b.json"]
    assert glob_files(tmp_path, "s/[!ab].json") == ["s/7.json"]
    assert glob_files(tmp_path, "s/{a,c}.json*") == ["s/a.json", "s/c.jsonc"]
    assert glob_files(tmp_path, "s/{5..8}.json") == ["s/7.json"]


def test_dotfiles_match_like_other_files(tmp_path: Path) -> None:
    """Wildcards match names and directories that start with a dot."""
    _files(tmp_path, "eval/.hidden.json", "eval/.d/x.json")
    assert glob_files(tmp_path, "eval/*.json") == ["eval/.hidden.json"]
    assert glob_files(tmp_path, "eval/**/x.json") == ["eval/.d/x.json"]


def test_matching_is_case_sensitive(tmp_path: Path) -> None:
    """Letters in the pattern match only the same case."""
    _files(tmp_path, "eval/A.json")
    assert glob_files(tmp_path, "eval/a.json") == []
    assert glob_files(tmp_path, "eval/A.json") == ["eval/A.json"]


def test_symlinks_are_neither_followed_nor_matched(tmp_path: Path) -> None:
    """A symlinked file is not a candidate, and a symlinked directory is not entered."""
    _files(tmp_path, "real/a.json", "outside/b.json")
    (tmp_path / "real" / "link.json").symlink_to(tmp_path / "real" / "a.json")
    (tmp_path / "real" / "dir").symlink_to(tmp_path / "outside", target_is_directory=True)
    assert glob_files(tmp_path, "real/**/*.json") == ["real/a.json"]
    assert glob_files(tmp_path, "real/link.json") == []
    assert glob_files(tmp_path, "real/dir/b.json") == []


def test_git_and_node_modules_are_skipped(tmp_path: Path) -> None:
    """Directories named .git or node_modules are never searched, even when named literally."""
    _files(tmp_path, "a.json", ".git/b.json", "x/node_modules/c.json", "x/.gitkeep.json")
    assert glob_files(tmp_path, "**/*.json") == ["a.json", "x/.gitkeep.json"]
    assert glob_files(tmp_path, ".git/*.json") == []
    assert glob_files(tmp_path, "x/node_modules/*.json") == []


def test_only_regular_files_are_candidates(tmp_path: Path) -> None:
    """A directory whose name matches the glob is not a scenario document."""
    (tmp_path / "eval" / "dir.json").mkdir(parents=True)
    _files(tmp_path, "eval/file.json")
    assert glob_files(tmp_path, "eval/*.json") == ["eval/file.json"]


def test_literal_pattern_matches_only_that_file(tmp_path: Path) -> None:
    """A pattern without wildcards matches exactly one existing regular file."""
    _files(tmp_path, "eval/a.json", "eval/ab.json")
    assert glob_files(tmp_path, "eval/a.json") == ["eval/a.json"]
    assert glob_files(tmp_path, "eval/missing.json") == []


def test_results_are_sorted(tmp_path: Path) -> None:
    """Matches come back in code-point order of their root-relative path."""
    _files(tmp_path, "e/b.json", "e/a/z.json", "e/B.json", "e/a.json")
    assert glob_files(tmp_path, "e/**/*.json") == ["e/B.json", "e/a.json", "e/a/z.json", "e/b.json"]


def test_leading_dot_slash_and_backslashes_are_normalised(tmp_path: Path) -> None:
    """``./eval/*.json`` and ``eval\\*.json`` select the same files, with clean sources."""
    root = _root(tmp_path)
    _write_scenario(root, "a.eval.json", scenario("a"))
    for pattern in ("./eval/scenarios/*.json", "eval\\scenarios\\*.json"):
        found = _discover(root, pattern)
        assert [s.source for s in found.scenarios] == ["eval/scenarios/a.eval.json"]


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("/etc/*.json", "not absolute"),
        ("\\abs\\*.json", "not absolute"),
        ("C:/x/*.json", "not absolute"),
        ("../*.json", "must not climb out of the root"),
        ("eval/../../*.json", "must not climb out of the root"),
    ],
)
def test_absolute_or_climbing_glob_is_invalid(tmp_path: Path, pattern: str, fragment: str) -> None:
    """An absolute glob or one with a '..' segment is invalid-scenario-glob, checked first."""
    diagnostic = _only(
        discover_scenarios(
            tmp_path,
            pattern,
            origin=Origin(kind="project", root=tmp_path),
            glob_source="atlante.jsonc",
        )
    )
    assert diagnostic.code == "invalid-scenario-glob"
    assert fragment in diagnostic.message
    assert (diagnostic.source, diagnostic.pointer) == ("atlante.jsonc", "/eval/scenarios")
    assert diagnostic.next


def test_glob_matching_nothing_is_empty_scenario_glob(tmp_path: Path) -> None:
    """A glob that matches no regular file is empty-scenario-glob with a next step."""
    root = _root(tmp_path)
    diagnostic = _only(_discover(root, "eval/scenarios/*.json"))
    assert diagnostic.code == "empty-scenario-glob"
    assert diagnostic.pointer == "/eval/scenarios"
    assert diagnostic.next is not None
    assert "author scenario documents" in diagnostic.next


# --- parsing and schema ---------------------------------------------------------------


def test_valid_scenarios_are_sorted_by_name_with_source_and_origin(tmp_path: Path) -> None:
    """Valid documents become scenarios sorted by name, whatever their file order."""
    root = _root(tmp_path)
    _write_scenario(root, "1.eval.json", scenario("zeta"))
    _write_scenario(root, "2.eval.json", scenario("alpha", description="First."))
    found = _discover(root)
    assert found.diagnostics == ()
    assert [s.name for s in found.scenarios] == ["alpha", "zeta"]
    alpha = found.scenarios[0]
    assert alpha.source == "eval/scenarios/2.eval.json"
    assert alpha.origin.kind == "project"
    assert alpha.document.description == "First."
    assert alpha.fixture_path == root / "eval" / "fixtures" / "app"


def test_jsonc_scenarios_allow_comments_but_json_ones_do_not(tmp_path: Path) -> None:
    """A .jsonc scenario may hold comments; the same text in a .json file is invalid-json."""
    root = _root(tmp_path)
    text = json.dumps(scenario("commented"), indent=2).replace("{\n", "{\n  // note\n", 1)
    _write_scenario(root, "a.eval.jsonc", text)
    _write_scenario(root, "b.eval.json", text.replace("commented", "strict"))
    found = _discover(root)
    assert [s.name for s in found.scenarios] == ["commented"]
    [diagnostic] = found.diagnostics
    assert (diagnostic.code, diagnostic.source) == ("invalid-json", "eval/scenarios/b.eval.json")
    assert diagnostic.location is not None
    assert (diagnostic.location.line, diagnostic.location.column) == (2, 3)
    assert "comments are not allowed" in diagnostic.message


def test_malformed_scenario_reports_line_and_column(tmp_path: Path) -> None:
    """A syntax error is invalid-json with the 1-based line and column of the error."""
    root = _root(tmp_path)
    _write_scenario(root, "bad.eval.jsonc", '{\n  "name": "x",\n  "task": {\n    "a" 1\n}')
    diagnostic = _only(_discover(root))
    assert diagnostic.code == "invalid-json"
    assert diagnostic.message == 'malformed JSONC: Unexpected "1"'
    assert diagnostic.location is not None
    assert (diagnostic.location.line, diagnostic.location.column) == (4, 9)
    assert diagnostic.next


@pytest.mark.parametrize(
    ("content", "code", "fragment"),
    [
        (b"", "invalid-json", "the document is empty"),
        (b'{"name": "caf\xe9"}', "scenario-unreadable", "not valid UTF-8 (byte offset 13)"),
        (b"[]", "invalid-eval-scenario", "must be a JSON object"),
        (b'{"name": "x"}', "unsupported-schema", "has no $schema"),
        (b'{"$schema": "https://atlante.sh/schema/v0.2/eval-scenario.json"}', "unsupported-schema",
         "unsupported scenario $schema"),
    ],
)  # fmt: skip
def test_unusable_scenario_files(tmp_path: Path, content: bytes, code: str, fragment: str) -> None:
    """Empty, non-UTF-8, non-object and wrong-$schema documents each get their own code."""
    root = _root(tmp_path)
    (root / "eval" / "scenarios").mkdir(parents=True)
    (root / "eval" / "scenarios" / "x.eval.json").write_bytes(content)
    diagnostic = _only(_discover(root))
    assert diagnostic.code == code
    assert fragment in diagnostic.message
    assert diagnostic.source == "eval/scenarios/x.eval.json"
    assert diagnostic.next


def test_ten_megabyte_scenario_is_refused_without_reading_it(tmp_path: Path) -> None:
    """A 10 MB scenario document is scenario-unreadable (limit 1 MiB), other files still load."""
    root = _root(tmp_path)
    _write_scenario(root, "ok.eval.json", scenario("ok"))
    with (root / "eval" / "scenarios" / "big.eval.json").open("wb") as handle:
        handle.truncate(10 * 1024 * 1024)
    found = _discover(root)
    assert [s.name for s in found.scenarios] == ["ok"]
    [diagnostic] = found.diagnostics
    assert diagnostic.code == "scenario-unreadable"
    assert "10485760 bytes, larger than the 1048576-byte limit" in diagnostic.message


def test_wrong_schema_is_checked_before_the_rest(tmp_path: Path) -> None:
    """A wrong $schema is the only diagnostic even when other fields are also invalid."""
    root = _root(tmp_path)
    _write_scenario(root, "x.eval.json", {**scenario("Bad Name"), "$schema": "https://x"})
    diagnostic = _only(_discover(root))
    assert (diagnostic.code, diagnostic.pointer) == ("unsupported-schema", "/$schema")
    assert diagnostic.expected == SCENARIO_URI


def _invalid(tmp_path: Path, document: dict[str, Any]) -> list[tuple[str | None, str]]:
    root = _root(tmp_path)
    path = _write_scenario(root, "x.eval.json", document)
    found = _discover(root)
    assert found.scenarios == ()
    lines = path.read_text(encoding="utf-8").splitlines()
    for diagnostic in found.diagnostics:
        assert diagnostic.code == "invalid-eval-scenario"
        assert diagnostic.source == "eval/scenarios/x.eval.json"
        assert diagnostic.location is not None
        assert diagnostic.location.line <= len(lines)
        assert diagnostic.next is not None
        assert "docs/scenarios.md" in diagnostic.next
    return sorted((d.pointer, d.message) for d in found.diagnostics)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("Adds-Health", "must match the pattern ^[a-z0-9][a-z0-9-]*$"),
        ("-leading", "must match the pattern"),
        ("has space", "must match the pattern"),
        ("under_score", "must match the pattern"),
    ],
)
def test_bad_slug(tmp_path: Path, name: str, fragment: str) -> None:
    """A name that is not a slug fails at /name, quoting the name."""
    [(pointer, message)] = _invalid(tmp_path, scenario(name))
    assert pointer == "/name"
    assert fragment in message
    assert json.dumps(name) in message


def test_slug_allows_trailing_and_double_hyphens(tmp_path: Path) -> None:
    """Names like ``a--b-`` are slugs (the reference pattern has no more rules)."""
    root = _root(tmp_path)
    _write_scenario(root, "x.eval.json", scenario("a--b-"))
    assert [s.name for s in _discover(root).scenarios] == ["a--b-"]


def test_zero_checks(tmp_path: Path) -> None:
    """A scenario needs at least one check."""
    assert _invalid(tmp_path, scenario("x", checks=[])) == [
        ("/checks", '"checks" must have at least 1 item')
    ]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("/abs/app", "must be relative, not absolute"),
        ("\\abs", "must be relative, not absolute"),
        ("C:\\app", "must be relative, not absolute"),
        ("../app", "must not contain '..' segments"),
        ("eval/../../app", "must not contain '..' segments"),
        ("eval\\..\\app", "must not contain '..' segments"),
        ("app/.git", "must not contain a .git segment"),
        ("node_modules/x", "must not contain a node_modules segment"),
        ("app/", "must not end with a path separator"),
        ("a\0b", "must not contain a NUL character"),
    ],
)
def test_unsafe_paths_fail_in_fixture_and_checks(tmp_path: Path, value: str, fragment: str) -> None:
    """Absolute, '..', .git, node_modules, trailing-slash and NUL paths fail wherever used."""
    document = scenario(
        "x",
        fixture=value,
        checks=[
            {"type": "file-exists", "path": value},
            {"type": "file-contains", "path": value, "pattern": "x"},
            {"type": "diff-allowlist", "allow": ["ok.txt", value]},
        ],
    )
    found = _invalid(tmp_path, document)
    assert [pointer for pointer, _ in found] == [
        "/checks/0/path",
        "/checks/1/path",
        "/checks/2/allow/1",
        "/task/fixture",
    ]
    for _, message in found:
        assert message == f"path {json.dumps(value)} {fragment}"


@pytest.mark.parametrize("kind", ["file-absent", "file-unchanged"])
def test_unsafe_paths_fail_in_every_file_check(tmp_path: Path, kind: str) -> None:
    """file-absent and file-unchanged paths follow the same path rule."""
    found = _invalid(tmp_path, scenario("x", checks=[{"type": kind, "path": "../x"}]))
    assert found == [("/checks/0/path", "path \"../x\" must not contain '..' segments")]


def test_invalid_regular_expressions_fail_at_validation(tmp_path: Path) -> None:
    """outputMatches and regex file-contains patterns must compile with Python ``re``."""
    checks: list[CheckDoc] = [
        {"type": "command", "run": ["true"], "outputMatches": "(unclosed"},
        {"type": "file-contains", "path": "a", "pattern": "[a-", "regex": True},
        {"type": "file-contains", "path": "a", "pattern": "(?<name>x)", "regex": True},
        {"type": "file-contains", "path": "a", "pattern": "[a-", "regex": False},
        {"type": "file-contains", "regex": True, "path": "a", "pattern": "ok+"},
    ]
    found = _invalid(tmp_path, scenario("x", checks=checks))
    assert [pointer for pointer, _ in found] == [
        "/checks/0/outputMatches",
        "/checks/1/pattern",
        "/checks/2/pattern",
    ]
    assert found[0][1].startswith('"outputMatches" must be a valid regular expression')
    assert "missing ), unterminated subpattern" in found[0][1]
    assert found[1][1].startswith("pattern must be a valid regular expression when regex is true")
    assert "unknown extension ?<n" in found[2][1]


def test_regex_key_order_does_not_matter(tmp_path: Path) -> None:
    """``pattern`` written before ``regex: true`` is still compiled as a regex."""
    check = {"type": "file-contains", "pattern": "(", "path": "a", "regex": True}
    found = _invalid(tmp_path, scenario("x", checks=[check]))
    assert [pointer for pointer, _ in found] == ["/checks/0/pattern"]


def test_unknown_keys_fan_out_at_every_level(tmp_path: Path) -> None:
    """Each unknown key (top level, task, budget, check) is its own diagnostic."""
    document = scenario("x", checks=[{"type": "file-exists", "path": "a", "extra": 1}])
    document["tags"] = ["a"]
    document["task"]["model"] = "m"
    document["budget"] = {"timeoutMs": 5, "trials": 2}
    assert _invalid(tmp_path, document) == [
        ("/budget/trials", 'unrecognized property "trials"'),
        ("/checks/0/extra", 'unrecognized property "extra"'),
        ("/tags", 'unrecognized property "tags"'),
        ("/task/model", 'unrecognized property "model"'),
    ]


def test_check_type_problems_point_at_type(tmp_path: Path) -> None:
    """An unknown or missing check type points at /checks/<i>/type."""
    checks: list[dict[str, Any]] = [{"type": "file-matches", "path": "a"}, {"path": "a"}]
    found = _invalid(tmp_path, scenario("x", checks=checks))
    assert found[0] == (
        "/checks/0/type",
        'unknown check type "file-matches"; expected one of '
        "'command', 'file-exists', 'file-absent', 'file-unchanged', 'file-contains', "
        "'diff-allowlist'",
    )
    assert found[1] == ("/checks/1/type", 'missing required property "type"')


def test_check_field_constraints(tmp_path: Path) -> None:
    """Empty argv, empty argv items, timeouts over an hour and empty allowlists are invalid."""
    checks: list[dict[str, Any]] = [
        {"type": "command", "run": []},
        {"type": "command", "run": ["bun", ""]},
        {"type": "command", "run": ["x"], "timeoutMs": 3_600_001},
        {"type": "command", "run": ["x"], "expectExit": "0"},
        {"type": "diff-allowlist", "allow": []},
        {"type": "file-contains", "path": "a", "pattern": ""},
    ]
    found = _invalid(tmp_path, scenario("x", checks=checks))
    assert [pointer for pointer, _ in found] == [
        "/checks/0/run",
        "/checks/1/run/1",
        "/checks/2/timeoutMs",
        "/checks/3/expectExit",
        "/checks/4/allow",
        "/checks/5/pattern",
    ]


def test_task_and_budget_constraints(tmp_path: Path) -> None:
    """Missing prompt, empty agent, wrong version and an over-long budget each fail in place."""
    document = scenario("x", agent="")
    del document["task"]["prompt"]
    document["version"] = "0.2"
    document["budget"] = {"timeoutMs": 3_600_001}
    assert _invalid(tmp_path, document) == [
        ("/budget/timeoutMs", '"timeoutMs" must be less than or equal to 3600000 (got 3600001)'),
        ("/task/agent", '"agent" must not be empty'),
        ("/task/prompt", 'missing required property "prompt"'),
        ("/version", '"version" must be \'0.1\' (got "0.2")'),
    ]


def test_defaults_of_optional_check_fields(tmp_path: Path) -> None:
    """expectExit defaults to 0, timeoutMs to 120000 and regex to false."""
    root = _root(tmp_path)
    checks: list[CheckDoc] = [
        {"type": "command", "run": ["bun", "test"]},
        {"type": "file-contains", "path": "a", "pattern": "(literal"},
    ]
    _write_scenario(root, "x.eval.json", scenario("x", checks=checks))
    [found] = _discover(root).scenarios
    command, contains = found.document.checks
    assert isinstance(command, CommandCheck)
    assert (command.expect_exit, command.timeout_ms, command.output_matches) == (
        0,
        CHECK_TIMEOUT_DEFAULT_MS,
        None,
    )
    assert isinstance(contains, FileContainsCheck)
    assert contains.regex is False


# --- names --------------------------------------------------------------------------


def test_duplicate_names_keep_the_first_file(tmp_path: Path) -> None:
    """The later of two documents with one name is dropped with duplicate-scenario-name."""
    root = _root(tmp_path)
    _write_scenario(root, "a.eval.json", scenario("same", prompt="first"))
    _write_scenario(root, "b.eval.json", scenario("same", prompt="second"))
    found = _discover(root)
    [kept] = found.scenarios
    assert kept.document.task.prompt == "first"
    [diagnostic] = found.diagnostics
    assert diagnostic.code == "duplicate-scenario-name"
    assert diagnostic.message == (
        'scenario name "same" is declared by both eval/scenarios/a.eval.json '
        "and eval/scenarios/b.eval.json"
    )
    assert (diagnostic.source, diagnostic.pointer) == ("eval/scenarios/b.eval.json", "/name")
    assert diagnostic.location is not None


def test_duplicate_is_reported_even_when_the_first_has_a_bad_fixture(tmp_path: Path) -> None:
    """Name uniqueness does not depend on whether the first document's fixture is valid."""
    root = _root(tmp_path)
    _write_scenario(root, "a.eval.json", scenario("same", fixture="missing"))
    _write_scenario(root, "b.eval.json", scenario("same"))
    found = _discover(root)
    assert found.scenarios == ()
    assert sorted(d.code for d in found.diagnostics) == [
        "duplicate-scenario-name",
        "invalid-scenario-fixture",
    ]


# --- fixtures -----------------------------------------------------------------------


def _fixture_error(tmp_path: Path, fixture: str, setup: Any = None) -> Diagnostic:
    root = _root(tmp_path)
    if setup is not None:
        setup(root)
    _write_scenario(root, "x.eval.json", scenario("x", fixture=fixture))
    diagnostic = _only(_discover(root))
    assert diagnostic.code == "invalid-scenario-fixture"
    assert (diagnostic.source, diagnostic.pointer) == (
        "eval/scenarios/x.eval.json",
        "/task/fixture",
    )
    assert diagnostic.location is not None
    assert (diagnostic.location.line, diagnostic.location.column) == (6, 5)
    assert diagnostic.expected
    assert diagnostic.next
    return diagnostic


def test_fixture_missing(tmp_path: Path) -> None:
    """A fixture directory that does not exist is rejected at discovery."""
    diagnostic = _fixture_error(tmp_path, "eval/fixtures/nope")
    assert diagnostic.message == "fixture does not exist: eval/fixtures/nope"


def test_fixture_is_a_file(tmp_path: Path) -> None:
    """A fixture that is a regular file is rejected."""
    diagnostic = _fixture_error(tmp_path, "eval/fixtures/app/README.md")
    assert diagnostic.message == "fixture is not a directory: eval/fixtures/app/README.md"


def test_fixture_is_a_symlink(tmp_path: Path) -> None:
    """A fixture reached through a symlink is rejected, even when it points at a real fixture."""

    def link(root: Path) -> None:
        (root / "eval" / "fixtures" / "link").symlink_to(root / "eval" / "fixtures" / "app")

    diagnostic = _fixture_error(tmp_path, "eval/fixtures/link", link)
    assert diagnostic.message == "fixture path traverses a symbolic link: eval/fixtures/link"


def test_fixture_parent_is_a_symlink(tmp_path: Path) -> None:
    """A symlinked directory on the way to the fixture is rejected too."""

    def link(root: Path) -> None:
        (root / "eval" / "alias").symlink_to(root / "eval" / "fixtures")

    diagnostic = _fixture_error(tmp_path, "eval/alias/app", link)
    assert "traverses a symbolic link" in diagnostic.message


def test_fixture_containing_a_symlink(tmp_path: Path) -> None:
    """A symlink anywhere inside the fixture tree is rejected, named by its path."""

    def link(root: Path) -> None:
        inner = root / "eval" / "fixtures" / "app" / "src"
        inner.mkdir()
        (inner / "passwd").symlink_to("/etc/passwd")

    diagnostic = _fixture_error(tmp_path, "eval/fixtures/app", link)
    assert diagnostic.message == "fixture contains a symbolic link: eval/fixtures/app/src/passwd"


@pytest.mark.parametrize(
    ("entry", "is_dir"),
    [(".git", True), (".git", False), ("node_modules", True), ("deep/node_modules", False)],
)
def test_fixture_containing_git_or_node_modules(tmp_path: Path, entry: str, is_dir: bool) -> None:
    """A .git or node_modules entry (directory or file, at any depth) is rejected."""

    def plant(root: Path) -> None:
        target = root / "eval" / "fixtures" / "app" / entry
        if is_dir:
            write_text(target / "HEAD", "ref: refs/heads/main\n")
        else:
            write_text(target, "gitdir: /elsewhere\n")

    diagnostic = _fixture_error(tmp_path, "eval/fixtures/app", plant)
    assert diagnostic.message == f"fixture contains a forbidden entry: eval/fixtures/app/{entry}"


def test_fixture_cannot_be_the_root(tmp_path: Path) -> None:
    """``.`` names the root itself, which is never a fixture."""
    diagnostic = _fixture_error(tmp_path, ".")
    assert diagnostic.message == "fixture must resolve inside the project"


def test_fixture_problem_accepts_a_plain_tree(tmp_path: Path) -> None:
    """A directory of plain files and folders (dotfiles included) is a valid fixture."""
    write_text(tmp_path / "fx" / ".env.example", "A=1\n")
    write_text(tmp_path / "fx" / "src" / "deep" / "x.ts", "export {}\n")
    (tmp_path / "fx" / "empty").mkdir()
    assert fixture_problem(tmp_path, "fx") is None


def test_fixture_with_unreadable_directory() -> None:
    """An unreadable directory inside the fixture is reported instead of raising (as ``nobody``)."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from atlante_eval.project.discovery import fixture_problem\n"
        "print(fixture_problem(Path(sys.argv[1]), 'fx'))\n"
    )
    with nobody_workspace() as base:
        locked = base / "project" / "fx" / "locked"
        locked.mkdir(parents=True)
        give_to_nobody(base / "project")
        locked.chmod(0)
        done = python_as_nobody(code, base, str(base / "project"))
        locked.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fixture directory is unreadable: fx/locked")


def test_one_bad_document_does_not_hide_the_others(tmp_path: Path) -> None:
    """A mixed folder yields every valid scenario and one diagnostic per bad document."""
    root = _root(tmp_path)
    _write_scenario(root, "a.eval.json", scenario("good-a"))
    _write_scenario(root, "b.eval.json", scenario("good-b"))
    _write_scenario(root, "c.eval.json", {**scenario("c"), "$schema": "x"})
    _write_scenario(root, "d.eval.json", scenario("D"))
    _write_scenario(root, "e.eval.json", scenario("good-a"))
    _write_scenario(root, "f.eval.json", scenario("f", fixture="missing"))
    found = _discover(root)
    assert [s.name for s in found.scenarios] == ["good-a", "good-b"]
    assert [(d.code, d.source) for d in found.diagnostics] == [
        ("unsupported-schema", "eval/scenarios/c.eval.json"),
        ("invalid-eval-scenario", "eval/scenarios/d.eval.json"),
        ("duplicate-scenario-name", "eval/scenarios/e.eval.json"),
        ("invalid-scenario-fixture", "eval/scenarios/f.eval.json"),
    ]
