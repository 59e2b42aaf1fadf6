"""Every per-host, per-check and per-format table has exactly the keys of its Literal.

The tables are found, not listed: every module-level table of the package whose
annotation is keyed by one of the extension Literals (hosts, check types, report
formats, history backends). docs/extending.md must name
each of them in its section, and every file and table it names must exist.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import AfterValidator
from pydantic.fields import FieldInfo

import atlante_eval
from atlante_eval._util.endpoints import Endpoint
from atlante_eval.checks import CHECK_KINDS
from atlante_eval.choices import CheckType, CoreCheckType, HistoryBackend, HostName
from atlante_eval.hosts import HOST_FACTORIES, SessionUsage, model_endpoints
from atlante_eval.hosts.session import CliHost
from atlante_eval.project import AnyCheck
from atlante_eval.project.native import NATIVE_HOSTS
from atlante_eval.project.scenarios import Check
from atlante_eval.project.validation import CHECK_TAGS, CheckModel, Regex
from atlante_eval.views.formats import CompareFormat, RunReportFormat

ROOT = Path(__file__).resolve().parent.parent
EXTENDING = ROOT / "docs" / "extending.md"
#: Each extension Literal, the keys its tables must have, and its section of extending.md.
LITERALS: dict[str, tuple[frozenset[str], str]] = {
    "HostName": (frozenset(get_args(HostName)), "Adding a host"),
    "CheckType": (frozenset(get_args(CheckType)), "Adding a check type"),
    "RunReportFormat": (frozenset(get_args(RunReportFormat)), "Adding a report format"),
    "CompareFormat": (frozenset(get_args(CompareFormat)), "Adding a report format"),
    "HistoryBackend": (frozenset(get_args(HistoryBackend)), "Adding a history backend"),
}
_KEYED = re.compile(r"^(?:dict|Mapping|MappingProxyType)\[(\w+),")
_PATH = re.compile(r"`(atlante_eval/[\w/<>.-]+)`")
_TABLE = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def _modules() -> Iterator[Any]:
    yield atlante_eval
    for info in pkgutil.walk_packages(atlante_eval.__path__, "atlante_eval."):
        if info.name.endswith(".__main__"):  # running it is the CLI
            continue
        if ".migrations." in info.name:  # Alembic's scripts: Alembic runs them
            continue
        yield importlib.import_module(info.name)


def _tables() -> list[tuple[str, str, str, Mapping[str, object]]]:
    """``(literal, module path, table name, table)`` for every table keyed by a Literal."""
    found = []
    for module in _modules():
        for name, annotation in vars(module).get("__annotations__", {}).items():
            keyed = _KEYED.match(str(annotation))
            if keyed and keyed.group(1) in LITERALS:
                path = str(Path(module.__file__).relative_to(ROOT))
                found.append((keyed.group(1), path, name, getattr(module, name)))
    return found


def _sections() -> dict[str, list[str]]:
    """The numbered items of each ``## Adding ...`` section of docs/extending.md."""
    sections: dict[str, list[str]] = {}
    for block in re.split(r"^## ", EXTENDING.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]:
        title, _, body = block.partition("\n")
        items = re.split(r"^\d+\. ", body, flags=re.MULTILINE)[1:]
        sections[title.strip()] = [" ".join(item.split()) for item in items]
    return sections


def _union_tags(check: object = AnyCheck) -> set[str]:
    """The ``type`` literal of every member of a scenario check union."""
    union = get_args(check)[0]
    return {get_args(member.model_fields["type"].annotation)[0] for member in get_args(union)}


def test_the_tables_are_found() -> None:
    """The search sees the tables it must (a search that finds nothing proves nothing)."""
    names = {(literal, name) for literal, _, name, _ in _tables()}
    assert {
        ("HostName", "HOST_FACTORIES"),
        ("HostName", "NATIVE_HOSTS"),
        ("CheckType", "CHECK_KINDS"),
        ("RunReportFormat", "RUN_REPORT_WRITERS"),
        ("CompareFormat", "COMPARE_WRITERS"),
        ("HistoryBackend", "BACKENDS"),
    } <= names


@pytest.mark.parametrize(
    ("literal", "path", "name", "table"),
    _tables(),
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_every_table_has_exactly_the_keys_of_its_literal(
    literal: str, path: str, name: str, table: Mapping[str, object]
) -> None:
    """A table keyed by HostName, CheckType or a format has an entry for each, and no other."""
    assert set(table) == LITERALS[literal][0], f"{path}: {name}"


def test_extending_md_names_every_table_in_its_section() -> None:
    """Each table appears, with its module, in the section for adding what it is keyed by."""
    sections = _sections()
    for literal, path, name, _ in _tables():
        items = sections[LITERALS[literal][1]]
        assert any(f"`{path}`" in item and f"`{name}`" in item for item in items), (
            f"docs/extending.md, {LITERALS[literal][1]}: no step names {name} in {path}"
        )


def test_every_file_and_table_extending_md_names_exists() -> None:
    """Paths name real files or directories; a table named beside its module is defined there."""
    for title, items in _sections().items():
        if not title.startswith("Adding"):
            continue
        for item in items:
            paths = [path for path in _PATH.findall(item) if "<" not in path]
            for path in paths:
                assert (ROOT / path).exists(), f"{title}: {path}"
            modules = [
                importlib.import_module(path.removesuffix(".py").replace("/", "."))
                for path in paths
                if path.endswith(".py")
            ]
            for table in _TABLE.findall(item):
                assert any(hasattr(module, table) for module in modules), f"{title}: {table}"


@pytest.mark.parametrize("name", get_args(HostName))
def test_each_host_declares_what_its_sessions_need(name: HostName) -> None:
    """Each built-in host answers to its key and declares model endpoints and a stream parser.

    A host that declared no model endpoints would silently reach no model API
    under ``--isolation os``.
    """
    host = HOST_FACTORIES[name]()
    assert host.name == name
    assert isinstance(host, CliHost)
    endpoints = model_endpoints(host)
    assert endpoints
    assert all(isinstance(e, Endpoint) and not e.loopback for e in endpoints)
    usage = SessionUsage(max_tokens=10)
    parser = host.stream_parser(usage)
    assert parser.usage is usage
    assert parser.error is None


@pytest.mark.parametrize("name", get_args(HostName))
def test_each_hosts_release_names_its_command_and_runs_a_given_executable(name: HostName) -> None:
    """The npm package's executable is the host's command; a managed copy's path is honoured."""
    host = HOST_FACTORIES[name]()
    assert isinstance(host, CliHost)
    assert NATIVE_HOSTS[name].command == host.command
    assert NATIVE_HOSTS[name].versions
    assert NATIVE_HOSTS[name].package
    managed = HOST_FACTORIES[name]("/cache/node_modules/.bin/x")
    assert isinstance(managed, CliHost)
    assert managed._binary == "/cache/node_modules/.bin/x"


def test_each_host_reads_its_own_stream() -> None:
    """No two hosts share a stream parser or a command name."""
    hosts = [factory() for factory in HOST_FACTORIES.values()]
    cli_hosts = [host for host in hosts if isinstance(host, CliHost)]
    assert len(cli_hosts) == len(hosts)
    parsers = {type(host.stream_parser(SessionUsage(max_tokens=10))) for host in cli_hosts}
    assert len(parsers) == len(cli_hosts)
    assert len({host.command for host in cli_hosts}) == len(cli_hosts)


def test_the_project_config_accepts_exactly_the_host_names() -> None:
    """eval.host and eval.hosts are typed with the same HostName literal."""
    from atlante_eval.project.config import EvalConfig

    hints = typing.get_type_hints(EvalConfig)
    assert hints["host"] is HostName


def test_check_models_and_the_registry_agree() -> None:
    """The check unions, the registry's models and the validation tags name the same types."""
    types = set(get_args(CheckType))
    assert _union_tags() == types
    assert _union_tags(Check) == set(get_args(CoreCheckType))
    assert types == CHECK_TAGS
    for tag, kind in CHECK_KINDS.items():
        assert get_args(kind.model.model_fields["type"].annotation) == (tag,)
        assert issubclass(kind.model, CheckModel)


def _is_regex(annotation: object) -> bool:
    """Whether ``annotation`` is, or holds (``Regex | None``), the ``Regex`` type."""
    return annotation == Regex or any(_is_regex(arg) for arg in get_args(annotation))


def _holds_regex(field: FieldInfo) -> bool:
    """Whether a model field is typed ``Regex`` (pydantic moves a bare one's metadata out)."""
    validator = next(m for m in get_args(Regex)[1:] if isinstance(m, AfterValidator))
    return validator in field.metadata or _is_regex(field.annotation)


def test_every_regular_expression_field_is_one_a_check_reports() -> None:
    """A check model with a Regex field overrides patterns(), so validation sees its patterns."""
    for tag, kind in CHECK_KINDS.items():
        fields = kind.model.model_fields.items()
        regex = [name for name, field in fields if _holds_regex(field)]
        if regex:
            assert kind.model.patterns is not CheckModel.patterns, tag
