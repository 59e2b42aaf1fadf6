"""What the way to the first session must not pay for, and that deferring it changes nothing.

Each check runs in a fresh interpreter, so what the test process imported does
not hide what the launch path imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from stubcli import run_to_first_session

from atlante_eval.choices import SCHEMA_KINDS

#: Modules ``atlante-eval run`` must not import before its first session: adaptive
#: runs, comparison and its renderers, other report formats (HTML and its templates),
#: the terminal library.
_DEFERRED = (
    "atlante_eval.run.adaptive",
    "atlante_eval.views.adaptive_render",
    "atlante_eval.report.compare",
    "atlante_eval.views.compare_render",
    "atlante_eval.stats.sequential",
    "atlante_eval.report.merge",
    "atlante_eval.views.junit",
    "atlante_eval.views.show",
    "atlante_eval.views.show_render",
    "atlante_eval.project.schemas",
    "atlante_eval._util.fielddocs",
    "atlante_eval.selftest.core",
    "atlante_eval.views.html",
    # grading and the report's end: loaded once a session is over
    "atlante_eval.checks",
    "atlante_eval.run.grading",
    "atlante_eval.stats",
    "atlante_eval.report.results",
    "atlante_eval.report.loading",
    "atlante_eval.report.arms",
    "atlante_eval.report.consistency",
    "jinja2",
    "regex",  # the check matcher: loaded with the first pattern a scenario declares
    "json5",  # JSONC beyond plain JSON (comments, trailing commas): loaded when a file has them
    "rich",
    "structlog",
    # the history store: opened after the report is published, never before a session
    "atlante_eval.history.store",
    "atlante_eval.history.database",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "sqlite3",  # OpenCode's V2 credentials database: loaded when a trial copies one
    # the isolation machinery: loaded with the first trial a run confines (``--isolation os``)
    # or limits (``eval.limits``, ``--limit``); under ``none`` without limits, never
    "atlante_eval.isolation.trial",
    "atlante_eval.isolation.preflight",
    "atlante_eval.isolation.bwrap",
    "atlante_eval.isolation.seccomp",
    "atlante_eval.isolation.proxy",
    "atlante_eval.isolation.cgroups",
    "atlante_eval.isolation.hierarchies",
    "atlante_eval.isolation.tmpfs",
    # the model gateway's HTTP side: loaded with its first connection, during a session
    "atlante_eval.gateway.exchange",
    "h11",
    "httpx",
)


def _python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_run_path_imports_none_of_the_deferred_modules() -> None:
    out = _python(
        """
        import json, sys
        import atlante_eval.cli
        import atlante_eval.run.runner
        import atlante_eval.hosts.opencode
        import atlante_eval.hosts.claude_code
        print(json.dumps(sorted(sys.modules)))
        """
    )
    loaded = set(json.loads(out))
    assert "atlante_eval.run.runner" in loaded
    assert "atlante_eval.run.engine" in loaded
    assert sorted(m for m in _DEFERRED if m in loaded) == []


def test_run_reaches_its_first_session_without_the_deferred_modules(tmp_path: Path) -> None:
    """``atlante-eval run`` with the real OpenCode host (a stand-in executable on PATH),
    up to the spawn of its first session: the engine, the host and the gateway are
    loaded, nothing of the grading, the report's end, the views or the history."""
    modules, started = run_to_first_session(tmp_path, observe="sorted(sys.modules)")
    assert started == 1  # the session did run
    loaded = set(modules)
    assert {"atlante_eval.run.engine", "atlante_eval.hosts.opencode"} <= loaded
    assert "atlante_eval.gateway.server" in loaded
    assert sorted(m for m in _DEFERRED if m in loaded) == []


def test_no_field_docstring_is_read_before_a_schema_is_asked_for() -> None:
    out = _python(
        """
        import json
        from atlante_eval.report.models import TrialResult
        from atlante_eval.project.scenarios import ScenarioDocument
        print(json.dumps([TrialResult.model_fields["verdict"].description,
                          ScenarioDocument.model_fields["name"].description]))
        """
    )
    assert json.loads(out) == [None, None]


# Forces pydantic's own ``use_attribute_docstrings`` on the models that used to set it
# (the bases marked ``__field_docs__``): the schemas as they were built before.
_EAGER = """
from pydantic._internal import _config

_for_model = _config.ConfigWrapper.for_model.__func__

def _eager(cls, bases, namespace, kwargs):
    wrapper = _for_model(cls, bases, namespace, kwargs)
    if namespace.get("__field_docs__") or any(getattr(b, "__field_docs__", False) for b in bases):
        wrapper.config_dict["use_attribute_docstrings"] = True
    return wrapper

_config.ConfigWrapper.for_model = classmethod(_eager)
"""

_SCHEMAS = """
import json
from atlante_eval.project.schemas import json_schema, SCHEMA_KINDS
print(json.dumps({kind: json_schema(kind) for kind in SCHEMA_KINDS}))
"""


def test_schemas_are_the_same_as_with_eager_docstrings() -> None:
    lazy = json.loads(_python(_SCHEMAS))
    eager = json.loads(_python(_EAGER + _SCHEMAS))
    assert set(lazy) == set(SCHEMA_KINDS)
    for kind in SCHEMA_KINDS:
        assert lazy[kind] == eager[kind], kind
    # the descriptions really are there (the comparison is not of two empty texts)
    verdict = lazy["report"]["$defs"]["TrialResult"]["properties"]["verdict"]
    assert "description" in verdict


def test_models_built_before_the_schema_still_validate_after_it() -> None:
    out = _python(
        """
        import json
        from atlante_eval.report.models import TrialResult
        before = TrialResult(i=0, verdict="pass", duration_ms=1)
        from atlante_eval.project.schemas import json_schema
        json_schema("report")
        after = TrialResult.model_validate(before.model_dump(by_alias=True))
        print(json.dumps([after == before, TrialResult.model_fields["verdict"].description]))
        """
    )
    same, description = json.loads(out)
    assert same is True
    assert description


def test_help_loads_neither_pydantic_nor_importlib_metadata() -> None:
    """``atlante-eval --help`` builds no model and reads no distribution metadata."""
    out = _python(
        """
        import contextlib, io, json, sys
        from atlante_eval.cli import main
        sys.argv = ["atlante-eval", "--help"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main()
        print(json.dumps(sorted(sys.modules)))
        """
    )
    loaded = set(json.loads(out))
    assert "atlante_eval.cli.app" in loaded
    assert sorted(m for m in ("pydantic", "importlib.metadata") if m in loaded) == []


_BUILD_MODELS = """
import json, sys
{before}
from atlante_eval.report.models import TrialResult
TrialResult(i=0, verdict="pass", duration_ms=1)
print(json.dumps(["importlib.metadata" in sys.modules,
                  sys.modules["pydantic.plugin._loader"].get_plugins() == ()]))
"""


def test_the_cli_skips_pydantics_plugin_scan() -> None:
    """The console script answers pydantic's plugin lookup itself: building models reads no
    distribution metadata; the library alone still scans (so the check sees the scan)."""
    skipped = _python(
        _BUILD_MODELS.format(
            before="from atlante_eval._util.plugins import skip_pydantic_plugins\n"
            "assert skip_pydantic_plugins() and not skip_pydantic_plugins()"
        )
    )
    scanned = _python(_BUILD_MODELS.format(before=""))
    assert json.loads(skipped) == [False, True]
    assert json.loads(scanned)[0] is True


def test_the_run_command_caps_mallocs_arenas() -> None:
    """On glibc the run's process keeps two malloc arenas (asked of glibc itself)."""
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    out = _python(
        """
        from atlante_eval._util.memory import cap_malloc_arenas
        print(cap_malloc_arenas())
        """
    )
    assert out.split() == ["True"]


def test_cli_annotations_are_not_strings() -> None:
    """typer reads every command's annotations while it builds the app: as objects
    (evaluated once at import), not strings it must evaluate again on every start."""
    import importlib

    from atlante_eval.cli import COMMAND_MODULES

    for name in ("app", "usage", *COMMAND_MODULES):
        module = importlib.import_module(f"atlante_eval.cli.{name}")
        assert "annotations" not in vars(module), name


def test_the_plugin_stand_in_hands_any_other_name_to_pydantics_loader() -> None:
    """A later pydantic may ask its loader for more than ``get_plugins``: the stand-in
    then loads the real module and answers from it, so models still build."""
    out = _python(
        "import json, sys\n"
        "from atlante_eval._util.plugins import PLUGIN_LOADER, skip_pydantic_plugins\n"
        "skip_pydantic_plugins()\n"
        "from pydantic.plugin._loader import PYDANTIC_ENTRY_POINT_GROUP\n"
        "print(json.dumps([PYDANTIC_ENTRY_POINT_GROUP,\n"
        "                  hasattr(sys.modules[PLUGIN_LOADER], '_plugins')]))\n"
    )
    assert json.loads(out) == ["pydantic", True]
