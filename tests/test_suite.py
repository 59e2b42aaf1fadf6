"""load_suite: every pre-trial gate, in order, over real projects on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from factory import (
    BAD_PROJECTS,
    BadProject,
    make_multi_project,
    make_pack,
    make_project,
    scenario,
    tree_listing,
    write_native,
)

from atlante_eval import Suite, load_suite
from atlante_eval.diagnostics import DiagnosticError


def _load(root: Path, **kwargs: object) -> Suite:
    before = tree_listing(root)
    suite = load_suite(root, **kwargs)  # type: ignore[arg-type]
    assert tree_listing(root) == before
    return suite


def _fail(root: Path, **kwargs: object) -> DiagnosticError:
    before = tree_listing(root)
    with pytest.raises(DiagnosticError) as caught:
        load_suite(root, **kwargs)  # type: ignore[arg-type]
    assert tree_listing(root) == before
    assert caught.value.exit_code == 2
    return caught.value


@pytest.mark.parametrize("host", ["opencode", "claude-code"])
def test_multi_scenario_project_with_pack_suites_validates(tmp_path: Path, host: str) -> None:
    """Local scenarios plus included host-neutral and host-matching pack suites all load."""
    root = make_multi_project(tmp_path / "p", host=host)
    suite = _load(root)
    assert suite.project.eval.host == host
    assert [s.name for s in suite.scenarios] == [
        "local-a",
        "local-b",
        "local-c",
        "matching-one",
        "neutral-one",
    ]
    assert [s.name for s in suite.discovered] == [
        "local-a",
        "local-b",
        "local-c",
        "matching-one",
        "neutral-one",
        "unincluded-one",
    ]
    [warning] = suite.warnings
    assert (warning.code, warning.source) == (
        "pack-scenario-not-included",
        "@acme/unincluded@1.0.0/eval/scenarios/unincluded-one.eval.json",
    )
    by_name = {s.name: s for s in suite.scenarios}
    assert by_name["matching-one"].origin.label == "@acme/matching@2.1.0"
    assert by_name["matching-one"].declared_host == host
    assert by_name["neutral-one"].declared_host is None
    assert by_name["local-a"].origin.label == "project"
    assert suite.native is not None
    assert suite.native.host == host


@pytest.mark.parametrize("case", BAD_PROJECTS, ids=[case.id for case in BAD_PROJECTS])
def test_every_bad_input_gives_its_diagnostic_and_writes_nothing(
    tmp_path: Path, case: BadProject
) -> None:
    """Each broken project fails with one error: the expected code, pointer, position, source."""
    target = case.build(tmp_path / "p")
    before = tree_listing(tmp_path)
    with pytest.raises(DiagnosticError) as caught:
        load_suite(target)
    assert tree_listing(tmp_path) == before
    assert caught.value.exit_code == 2
    errors = [d for d in caught.value.diagnostics if d.severity == "error"]
    assert len(errors) == 1, errors
    [diagnostic] = errors
    assert diagnostic.code == case.code
    assert diagnostic.pointer == case.pointer
    if case.location is not None:
        assert diagnostic.location is not None
        assert (diagnostic.location.line, diagnostic.location.column) == case.location
    if case.source is not None:
        assert diagnostic.source == case.source
    assert diagnostic.message
    assert diagnostic.next or diagnostic.expected


def test_scenario_filter_keeps_only_named_scenarios(tmp_path: Path) -> None:
    """``scenario_filter`` selects local and included pack scenarios by name."""
    root = make_multi_project(tmp_path / "p")
    suite = _load(root, scenario_filter=["local-b", "neutral-one"])
    assert [s.name for s in suite.scenarios] == ["local-b", "neutral-one"]
    assert suite.warnings == ()
    assert len(suite.discovered) == 6


def test_unknown_scenario_filter_lists_what_exists(tmp_path: Path) -> None:
    """Naming a scenario that was not discovered is unknown-scenario-filter with the names."""
    root = make_project(tmp_path / "p", scenarios=[scenario("b"), scenario("a")])
    [diagnostic] = _fail(root, scenario_filter=["a", "nope", "also-nope"]).diagnostics
    assert diagnostic.code == "unknown-scenario-filter"
    assert diagnostic.message.endswith("no discovered scenario: also-nope, nope")
    assert diagnostic.expected == "a, b"
    assert diagnostic.next


def test_include_only_project_without_local_glob(tmp_path: Path) -> None:
    """An eval section with include and no scenarios glob runs only the included pack suite."""
    root = make_project(
        tmp_path / "p",
        scenarios=[],
        eval_extra={"include": ["@acme/p"]},
        top_extra={"extends": ["@acme/p"]},
    )
    config = (root / "atlante.jsonc").read_text(encoding="utf-8")
    config = config.replace('"scenarios": "eval/scenarios/*.eval.json*",', "")
    (root / "atlante.jsonc").write_text(config, encoding="utf-8")
    make_pack(
        root,
        "@acme/p",
        eval_meta={"scenarios": "eval/scenarios/*.eval.json"},
        scenarios=[scenario("only", fixture="eval/fixtures/pack-app")],
    )
    suite = _load(root)
    assert suite.project.eval.scenarios is None
    assert [s.source for s in suite.scenarios] == ["@acme/p@1.0.0/eval/scenarios/only.eval.json"]


def test_native_verification_can_be_skipped(tmp_path: Path) -> None:
    """``verify_native=False`` (used by ``list``) loads a project that was never built."""
    root = make_project(tmp_path / "p", native=False)
    suite = _load(root, verify_native=False)
    assert suite.native is None
    assert [s.name for s in suite.scenarios] == ["basic"]


def test_native_outputs_are_verified_for_the_selected_host(tmp_path: Path) -> None:
    """A claude-code project needs the Claude Code build, not the OpenCode one."""
    root = make_project(tmp_path / "p", host="claude-code", native=False)
    write_native(root, "opencode")
    [diagnostic] = _fail(root).diagnostics
    assert diagnostic.code == "native-outputs-not-verified"
    assert "Claude Code" in diagnostic.message
    write_native(root, "claude-code")
    assert _load(root).native is not None


def test_discovery_problems_are_reported_together(tmp_path: Path) -> None:
    """Problems in several scenario documents and pack suites surface in one failure."""
    root = make_project(
        tmp_path / "p",
        scenarios=[scenario("Bad"), scenario("ok", fixture="missing")],
        top_extra={"extends": ["@acme/p"]},
    )
    make_pack(root, "@acme/p", eval_meta={"scenarios": "none/*.json"})
    codes = sorted(d.code for d in _fail(root).diagnostics)
    assert codes == ["empty-scenario-glob", "invalid-eval-scenario", "invalid-scenario-fixture"]


@pytest.mark.parametrize(
    ("broken", "code"),
    [
        ({"scenario", "include", "native"}, "invalid-eval-scenario"),
        ({"include", "native"}, "eval-include-not-found"),
        ({"native"}, "unknown-scenario-filter"),
    ],
)
def test_gates_run_in_order(tmp_path: Path, broken: set[str], code: str) -> None:
    """Discovery errors come before include errors, then the filter, then native outputs."""
    root = make_project(
        tmp_path / "p",
        native="native" not in broken,
        scenarios=[scenario("Bad" if "scenario" in broken else "ok")],
        eval_extra={"include": ["@acme/none"]} if "include" in broken else {},
    )
    assert [d.code for d in _fail(root, scenario_filter=["x"]).diagnostics] == [code]


def test_native_outputs_are_the_last_gate(tmp_path: Path) -> None:
    """A project valid in every other way fails only on missing native outputs."""
    root = make_project(tmp_path / "p", native=False)
    assert [d.code for d in _fail(root).diagnostics] == ["native-outputs-not-verified"]


def test_incompatible_pack_failure_carries_the_warnings(tmp_path: Path) -> None:
    """When a host mismatch stops validation, the not-included warnings ride along."""
    root = make_project(
        tmp_path / "p",
        host="claude-code",
        eval_extra={"include": ["@acme/bad"]},
        top_extra={"extends": ["@acme/bad", "@acme/other"]},
    )
    suite = {"scenarios": "eval/scenarios/*.eval.json"}
    make_pack(
        root,
        "@acme/bad",
        eval_meta={**suite, "host": "opencode"},
        scenarios=[scenario("bad-one", fixture="eval/fixtures/pack-app")],
    )
    make_pack(
        root,
        "@acme/other",
        eval_meta=suite,
        scenarios=[scenario("other-one", fixture="eval/fixtures/pack-app")],
    )
    found = [(d.severity, d.code) for d in _fail(root).diagnostics]
    assert found == [
        ("error", "eval-pack-host-incompatible"),
        ("warning", "pack-scenario-not-included"),
    ]


def test_a_suite_of_only_unincluded_pack_scenarios_is_empty(tmp_path: Path) -> None:
    """If every selected scenario is a non-included pack scenario, the suite is empty."""
    root = make_project(
        tmp_path / "p",
        eval_extra={"include": ["@acme/a"]},
        top_extra={"extends": ["@acme/a", "@acme/b"]},
    )
    suite = {"scenarios": "eval/scenarios/*.eval.json"}
    for name in ("a", "b"):
        make_pack(
            root,
            f"@acme/{name}",
            eval_meta=suite,
            scenarios=[scenario(f"pack-{name}", fixture="eval/fixtures/pack-app")],
        )
    result = _load(root, scenario_filter=["pack-b"])
    assert result.scenarios == ()
    assert [w.code for w in result.warnings] == ["pack-scenario-not-included"]
