"""Every per-host, per-check and per-format table has exactly the keys of its Literal."""

from __future__ import annotations

import typing
from typing import get_args

import pytest

from atlante_eval._util.endpoints import Endpoint
from atlante_eval.checks import CHECK_KINDS
from atlante_eval.choices import CheckType, CoreCheckType, HostName
from atlante_eval.hosts import HOST_FACTORIES, SessionUsage, model_endpoints
from atlante_eval.hosts.session import CliHost
from atlante_eval.project import AnyCheck
from atlante_eval.project.native import NATIVE_HOSTS
from atlante_eval.project.scenarios import Check
from atlante_eval.project.validation import CHECK_TAGS
from atlante_eval.views.formats import (
    COMPARE_WRITERS,
    RUN_REPORT_WRITERS,
    CompareFormat,
    RunReportFormat,
)


def _union_tags(check: object = AnyCheck) -> set[str]:
    """The ``type`` literal of every member of a scenario check union."""
    union = get_args(check)[0]
    return {get_args(member.model_fields["type"].annotation)[0] for member in get_args(union)}


def test_host_tables_have_exactly_the_host_names() -> None:
    """The host factories and the project layer's native hosts cover every HostName, no other."""
    names = set(get_args(HostName))
    assert set(HOST_FACTORIES) == names
    assert set(NATIVE_HOSTS) == names


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


def test_check_tables_have_exactly_the_check_types() -> None:
    """The check union, the check registry and the validation tags agree."""
    types = set(get_args(CheckType))
    assert _union_tags() == types
    assert _union_tags(Check) == set(get_args(CoreCheckType))
    assert set(CHECK_KINDS) == types
    assert types == CHECK_TAGS
    for tag, kind in CHECK_KINDS.items():
        assert get_args(kind.model.model_fields["type"].annotation) == (tag,)


def test_writer_tables_have_exactly_their_formats() -> None:
    """Each writer table has exactly the formats its Literal names."""
    assert set(RUN_REPORT_WRITERS) == set(get_args(RunReportFormat))
    assert set(COMPARE_WRITERS) == set(get_args(CompareFormat))


def test_every_history_backend_has_one_entry() -> None:
    """The history backends table has exactly the keys of ``choices.HistoryBackend``."""
    from atlante_eval.choices import HistoryBackend
    from atlante_eval.history.backends import BACKENDS

    assert set(BACKENDS) == set(get_args(HistoryBackend))
