"""Pack suites: selecting packs, reading their eval metadata, include and host rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from factory import SCHEMA_V02, make_pack, make_project, scenario, tree_listing, write_json

from atlante_eval import load_suite
from atlante_eval.diagnostics import Diagnostic, DiagnosticError
from atlante_eval.project.config import load_project
from atlante_eval.project.packs import (
    discover_pack_suites,
    include_diagnostics,
    is_included,
    parse_package_locator,
    select_packs,
)

PACK = "@acme/review"
SUITE = {"scenarios": "eval/scenarios/*.eval.json"}


def _pack_scenario(name: str = "pack-one", **kwargs: Any) -> dict[str, Any]:
    return scenario(name, fixture="eval/fixtures/pack-app", **kwargs)


def _project(
    tmp_path: Path,
    *,
    extends: Any = (PACK,),
    include: list[str] | None = None,
    host: str = "opencode",
    meta: dict[str, Any] | None = SUITE,
    **pack: Any,
) -> Path:
    """Create a project extending ``extends`` with one pack installed (``PACK``)."""
    eval_extra = {"include": include} if include is not None else {}
    top = {"extends": list(extends) if isinstance(extends, tuple) else extends}
    root = make_project(tmp_path / "p", host=host, eval_extra=eval_extra, top_extra=top)
    pack.setdefault("scenarios", [_pack_scenario()])
    make_pack(root, PACK, eval_meta=meta, **pack)
    return root


def _suite_failure(root: Path) -> list[Diagnostic]:
    before = tree_listing(root)
    with pytest.raises(DiagnosticError) as caught:
        load_suite(root)
    assert caught.value.exit_code == 2
    assert tree_listing(root) == before
    return [d for d in caught.value.diagnostics if d.severity == "error"]


# --- locators ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("locator", "parsed"),
    [
        ("@acme/review", ("@acme/review", None)),
        ("@acme/review/strict", ("@acme/review", "strict")),
        ("@acme/review/presets/strict", ("@acme/review", "presets/strict")),
        ("review-pack", ("review-pack", None)),
        ("review-pack/strict", ("review-pack", "strict")),
        ("./presets/base.jsonc", None),
        ("../up", None),
        ("/abs/path", None),
        ("https://example.test/pack", None),
        ("@acme", None),
        ("@Acme/Review", None),
        ("review/../escape", None),
        ("review//x", None),
        ("review/", None),
        ("review:tag", None),
    ],
)
def test_parse_package_locator(locator: str, parsed: tuple[str, str | None] | None) -> None:
    """Package locators split into name and preset sub-path; paths and URLs are not packages."""
    assert parse_package_locator(locator) == parsed


# --- selecting packs --------------------------------------------------------------------


def test_extends_string_selects_the_pack(tmp_path: Path) -> None:
    """A single-string extends selects the pack it names, with its package.json identity."""
    root = _project(tmp_path, extends=PACK)
    packs = select_packs(load_project(root))
    assert list(packs) == [PACK]
    pack = packs[PACK]
    assert (pack.name, pack.version, pack.label) == (PACK, "1.0.0", f"{PACK}@1.0.0")
    assert pack.root == root / "node_modules" / "@acme" / "review"
    assert pack.locators == {PACK}


def test_preset_locator_selects_the_pack_and_records_the_locator(tmp_path: Path) -> None:
    """``@scope/name/preset`` selects the pack and remembers that exact locator."""
    root = _project(tmp_path, extends=[f"{PACK}/strict"], presets={"strict": {}})
    packs = select_packs(load_project(root))
    assert packs[PACK].locators == {f"{PACK}/strict"}


def test_packs_are_selected_transitively(tmp_path: Path) -> None:
    """A local preset and a pack's own preset may extend further packs."""
    root = _project(tmp_path, extends=["./presets/base.jsonc"])
    write_json(root / "presets" / "base.jsonc", {"extends": [PACK]})
    write_json(root / "node_modules" / "@acme" / "review" / "atlante.jsonc", {"extends": "base"})
    make_pack(root, "base")
    assert sorted(select_packs(load_project(root))) == [PACK, "base"]


def test_extends_cycles_terminate(tmp_path: Path) -> None:
    """Presets that extend each other in a cycle are each read once."""
    root = _project(tmp_path, extends=["./a.jsonc"])
    write_json(root / "a.jsonc", {"extends": ["./b.jsonc"]})
    write_json(root / "b.jsonc", {"extends": ["./a.jsonc", PACK]})
    assert list(select_packs(load_project(root))) == [PACK]


@pytest.mark.parametrize(
    "package_json",
    [
        {"name": PACK, "version": "1.0.0"},
        {"name": PACK, "version": "1.0.0", "atlante": {"format": 2}},
        {"name": PACK, "version": "1.0.0", "atlante": {"format": True}},
        {"name": PACK, "version": "1.0.0", "atlante": 1},
        {"name": PACK, "atlante": {"format": 1}},
        ["not", "an", "object"],
    ],
)
def test_packages_without_the_atlante_format_marker_are_not_packs(
    tmp_path: Path, package_json: Any
) -> None:
    """Only package.json files with name, version and ``"atlante": {"format": 1}`` are packs."""
    root = _project(tmp_path)
    write_json(root / "node_modules" / "@acme" / "review" / "package.json", package_json)
    assert select_packs(load_project(root)) == {}


def test_local_presets_outside_the_project_are_ignored(tmp_path: Path) -> None:
    """A relative extends that climbs out of the project selects nothing."""
    root = _project(tmp_path, extends=["../outside.jsonc"])
    write_json(tmp_path / "outside.jsonc", {"extends": [PACK]})
    assert select_packs(load_project(root)) == {}


def test_installed_but_unselected_packs_are_invisible(tmp_path: Path) -> None:
    """A pack under node_modules that extends does not reach is not a candidate."""
    root = _project(tmp_path, extends=["./local.jsonc"])
    write_json(root / "local.jsonc", {"agents": {}})
    suites = discover_pack_suites(load_project(root))
    assert (suites.packs, suites.scenarios, suites.diagnostics) == ({}, (), ())


# --- pack eval metadata ---------------------------------------------------------------


def test_pack_suite_is_discovered_from_the_pack_root(tmp_path: Path) -> None:
    """Pack scenarios resolve their fixture from the pack root and carry a package origin."""
    meta = {
        "host": "opencode",
        "scenarios": "eval/scenarios/*.eval.json",
        "fixtures": "eval/fixtures",
        "report": "eval/report.json",
        "source": "packages/review/eval",
    }
    root = _project(tmp_path, meta=meta)
    suites = discover_pack_suites(load_project(root))
    assert suites.diagnostics == ()
    [found] = suites.scenarios
    pack_root = root / "node_modules" / "@acme" / "review"
    assert found.source == f"{PACK}@1.0.0/eval/scenarios/pack-one.eval.json"
    assert found.fixture_path == pack_root / "eval" / "fixtures" / "pack-app"
    assert (found.origin.kind, found.origin.package_name, found.origin.locators) == (
        "package",
        PACK,
        (PACK,),
    )
    assert found.declared_host == "opencode"
    metadata = suites.packs[PACK].metadata
    assert metadata is not None
    assert (metadata.fixtures, metadata.report, metadata.source) == (
        "eval/fixtures",
        "eval/report.json",
        "packages/review/eval",
    )


def test_pack_fixture_is_not_resolved_from_the_project(tmp_path: Path) -> None:
    """A pack scenario naming a fixture that exists only in the project is invalid."""
    root = _project(tmp_path, scenarios=[scenario("pack-one", fixture="eval/fixtures/app")])
    [diagnostic] = discover_pack_suites(load_project(root)).diagnostics
    assert diagnostic.code == "invalid-scenario-fixture"
    assert diagnostic.source == f"{PACK}@1.0.0/eval/scenarios/pack-one.eval.json"


@pytest.mark.parametrize(
    ("meta", "pointer", "fragment"),
    [
        ({**SUITE, "tags": ["x"]}, "/eval/tags", 'unrecognized property "tags"'),
        ({"host": "opencode"}, "/eval/scenarios", 'missing required property "scenarios"'),
        ({"scenarios": ""}, "/eval/scenarios", "must not be empty"),
        ({**SUITE, "report": "../report.json"}, "/eval/report", "must not contain '..'"),
        ({**SUITE, "source": "/abs"}, "/eval/source", "must be relative"),
        ({**SUITE, "host": "cursor"}, "/eval/host", "'opencode' or 'claude-code'"),
        ({**SUITE, "host": "claude-code"}, "/eval/host", 'v0.1 presets admit only "opencode"'),
    ],
)
def test_invalid_pack_metadata(
    tmp_path: Path, meta: dict[str, Any], pointer: str, fragment: str
) -> None:
    """Invalid eval metadata in a pack's root preset is invalid-pack-eval at its pointer."""
    root = _project(tmp_path, meta=meta)
    [diagnostic] = discover_pack_suites(load_project(root)).diagnostics
    assert diagnostic.code == "invalid-pack-eval"
    assert (diagnostic.source, diagnostic.pointer) == (f"{PACK}@1.0.0/atlante.jsonc", pointer)
    assert fragment in diagnostic.message
    assert diagnostic.location is not None
    assert diagnostic.next is not None
    assert PACK in diagnostic.next


def test_v02_pack_preset_may_declare_claude_code(tmp_path: Path) -> None:
    """A v0.2 root preset may describe a claude-code suite."""
    root = _project(tmp_path, meta={**SUITE, "host": "claude-code"}, preset_schema=SCHEMA_V02)
    suites = discover_pack_suites(load_project(root))
    assert suites.diagnostics == ()
    assert [s.declared_host for s in suites.scenarios] == ["claude-code"]


def test_unreadable_root_preset_is_pack_eval_unreadable(tmp_path: Path) -> None:
    """A root preset that does not parse is pack-eval-unreadable with position and cause."""
    root = _project(tmp_path)
    preset = root / "node_modules" / "@acme" / "review" / "atlante.jsonc"
    preset.write_text('{\n  "eval": {\n    "scenarios": "x"\n  \n', encoding="utf-8")
    [diagnostic] = discover_pack_suites(load_project(root)).diagnostics
    assert diagnostic.code == "pack-eval-unreadable"
    assert diagnostic.source == f"{PACK}@1.0.0/atlante.jsonc"
    assert diagnostic.location is not None
    assert diagnostic.location.line == 5
    assert diagnostic.cause == "Unexpected end of input"
    assert diagnostic.next


def test_root_preset_in_atlante_json_is_named_in_diagnostics(tmp_path: Path) -> None:
    """Diagnostics about a pack's glob name the root preset file the pack really has."""
    root = _project(tmp_path, meta={"scenarios": "missing/*.json"}, preset_name="atlante.json")
    [diagnostic] = discover_pack_suites(load_project(root)).diagnostics
    assert diagnostic.code == "empty-scenario-glob"
    assert (diagnostic.source, diagnostic.pointer) == (
        f"{PACK}@1.0.0/atlante.json",
        "/eval/scenarios",
    )
    assert diagnostic.location is not None


@pytest.mark.parametrize(
    ("glob", "code"),
    [("missing/*.json", "empty-scenario-glob"), ("../*.json", "invalid-scenario-glob")],
)
def test_pack_glob_problems(tmp_path: Path, glob: str, code: str) -> None:
    """A pack glob matching nothing or climbing out of the pack root fails like a local one."""
    root = _project(tmp_path, meta={"scenarios": glob})
    [diagnostic] = discover_pack_suites(load_project(root)).diagnostics
    assert diagnostic.code == code


def test_pack_without_eval_metadata_or_preset_has_no_suite(tmp_path: Path) -> None:
    """A selected pack whose root preset has no eval key, or that has no root preset, is skipped."""
    root = _project(tmp_path, meta=None)
    assert discover_pack_suites(load_project(root)).scenarios == ()
    (root / "node_modules" / "@acme" / "review" / "atlante.jsonc").unlink()
    suites = discover_pack_suites(load_project(root))
    assert (suites.scenarios, suites.diagnostics) == ((), ())


# --- include -------------------------------------------------------------------------


def test_include_by_package_name_or_selecting_locator(tmp_path: Path) -> None:
    """A pack scenario is included by its package name or by the locator that selected it."""
    root = _project(tmp_path, extends=[f"{PACK}/strict"], presets={"strict": {}})
    suites = discover_pack_suites(load_project(root))
    [found] = suites.scenarios
    assert is_included(found, [PACK])
    assert is_included(found, [f"{PACK}/strict"])
    assert not is_included(found, [f"{PACK}/other"])
    assert not is_included(found, None)


@pytest.mark.parametrize(
    ("include", "code", "fragment"),
    [
        (["./local"], "invalid-eval-include", "is not a package locator"),
        (["https://example.test/p"], "invalid-eval-include", "is not a package locator"),
        (["@acme/other"], "eval-include-not-found", "names no pack the project selects"),
        ([f"{PACK}/strict"], "eval-include-not-found", "names no pack the project selects"),
    ],
)
def test_include_entries_are_validated(
    tmp_path: Path, include: list[str], code: str, fragment: str
) -> None:
    """Malformed and unknown include entries fail at /eval/include/<i> with a position."""
    root = _project(tmp_path, include=include)
    [diagnostic] = _suite_failure(root)
    assert diagnostic.code == code
    assert fragment in diagnostic.message
    assert (diagnostic.source, diagnostic.pointer) == ("atlante.jsonc", "/eval/include/0")
    assert diagnostic.location is not None
    assert diagnostic.next


def test_include_of_a_pack_without_suite(tmp_path: Path) -> None:
    """Including a selected pack that ships no eval suite is eval-include-no-suite."""
    root = _project(tmp_path, include=[PACK], meta=None)
    [diagnostic] = _suite_failure(root)
    assert diagnostic.code == "eval-include-no-suite"
    assert diagnostic.message == f"eval.include locator has no pack eval suite: {PACK}"


def test_include_reports_every_bad_entry(tmp_path: Path) -> None:
    """Each bad include entry gets its own diagnostic, in order."""
    root = _project(tmp_path, include=["./x", "@acme/none", PACK])
    found = [(d.code, d.pointer) for d in _suite_failure(root)]
    assert found == [
        ("invalid-eval-include", "/eval/include/0"),
        ("eval-include-not-found", "/eval/include/1"),
    ]


def test_include_diagnostics_is_empty_for_good_entries(tmp_path: Path) -> None:
    """A package name and a selecting preset locator are both valid include entries."""
    root = _project(tmp_path, extends=[PACK, f"{PACK}/strict"], include=[PACK, f"{PACK}/strict"])
    make_pack(root, PACK, eval_meta=SUITE, scenarios=[_pack_scenario()], presets={"strict": {}})
    project = load_project(root)
    assert include_diagnostics(project, discover_pack_suites(project)) == []


def test_unincluded_pack_scenarios_are_dropped_with_a_warning(tmp_path: Path) -> None:
    """Selecting a pack does not run its suite: its scenarios become warnings, not errors."""
    root = _project(tmp_path)
    suite = load_suite(root)
    assert [s.name for s in suite.scenarios] == ["basic"]
    assert [s.name for s in suite.discovered] == ["basic", "pack-one"]
    [warning] = suite.warnings
    assert (warning.severity, warning.code) == ("warning", "pack-scenario-not-included")
    assert '"pack-one"' in warning.message
    assert warning.next is not None
    assert PACK in warning.next


def test_scenario_filter_never_opts_a_pack_in(tmp_path: Path) -> None:
    """``--scenario`` naming a non-included pack scenario selects nothing and warns."""
    suite = load_suite(_project(tmp_path), scenario_filter=["pack-one"])
    assert suite.scenarios == ()
    assert [w.code for w in suite.warnings] == ["pack-scenario-not-included"]


# --- host compatibility -------------------------------------------------------------------


def test_incompatible_pack_host_fails_before_anything_runs(tmp_path: Path) -> None:
    """An included suite declaring another host is eval-pack-host-incompatible (exit 2)."""
    root = _project(
        tmp_path,
        include=[PACK],
        host="claude-code",
        meta={**SUITE, "host": "opencode"},
        preset_schema=SCHEMA_V02,
    )
    [diagnostic] = _suite_failure(root)
    assert diagnostic.code == "eval-pack-host-incompatible"
    assert diagnostic.source == f"{PACK}@1.0.0/eval/scenarios/pack-one.eval.json"
    assert '"opencode"' in diagnostic.message
    assert '"claude-code"' in diagnostic.message
    assert diagnostic.next


def test_incompatible_but_unincluded_pack_is_only_a_warning(tmp_path: Path) -> None:
    """Host compatibility is checked only for included suites."""
    root = _project(
        tmp_path, host="claude-code", meta={**SUITE, "host": "opencode"}, preset_schema=SCHEMA_V02
    )
    suite = load_suite(root)
    assert [w.code for w in suite.warnings] == ["pack-scenario-not-included"]


@pytest.mark.parametrize(
    ("host", "declared"),
    [("opencode", None), ("claude-code", None), ("opencode", "opencode"),
     ("claude-code", "claude-code")],
)  # fmt: skip
def test_host_neutral_and_matching_suites_run(
    tmp_path: Path, host: str, declared: str | None
) -> None:
    """A suite without a host runs under either host; one with a host runs under that host."""
    meta = {**SUITE, "host": declared} if declared else SUITE
    root = _project(tmp_path, include=[PACK], host=host, meta=meta, preset_schema=SCHEMA_V02)
    suite = load_suite(root)
    assert [s.name for s in suite.scenarios] == ["basic", "pack-one"]
    assert suite.warnings == ()


def test_names_are_unique_across_local_and_pack_suites(tmp_path: Path) -> None:
    """A pack scenario named like a local one is duplicate-scenario-name, even unincluded."""
    root = _project(tmp_path, scenarios=[_pack_scenario("basic")])
    [diagnostic] = _suite_failure(root)
    assert diagnostic.code == "duplicate-scenario-name"
    assert f"{PACK}@1.0.0/eval/scenarios/basic.eval.json" in diagnostic.message
    assert "eval/scenarios/basic.eval.json" in diagnostic.message


@pytest.mark.parametrize("include", [PACK, "@acme/review-impl"])
def test_pack_installed_under_an_npm_alias(tmp_path: Path, include: str) -> None:
    """A pack whose package.json name differs from its folder is included by either name."""
    root = _project(tmp_path, include=[include])
    package_json = root / "node_modules" / "@acme" / "review" / "package.json"
    write_json(
        package_json, {"name": "@acme/review-impl", "version": "2.0.0", "atlante": {"format": 1}}
    )
    suite = load_suite(root)
    assert [s.source for s in suite.scenarios] == [
        "eval/scenarios/basic.eval.json",
        "@acme/review-impl@2.0.0/eval/scenarios/pack-one.eval.json",
    ]
