"""A trial that writes into every cache and state directory it can reach changes no other trial.

One run per real host at ``--jobs 1`` (strict plan order): trial ``a-writer`` writes a
marker into its HOME, XDG config/data/cache/state directories and TMPDIR (where
the hosts keep their runtime caches, databases and transpiled code) and into a
directory shared on purpose (``SHARED_PROBE``, passed with ``--pass-env``: the
control that shows the probe sees a shared location); trial ``b-reader``, which
starts after it, collects every marker it can find at the same places into
``seen.txt``. The reader must find exactly one marker, the control's, and both
trials must pass their checks, so the writer's cache writes changed neither the
reader's sandbox nor its result.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from factory import make_project, scenario

from atlante_eval import run_eval

from .environment import HOSTS, real_host_environment
from .fixtures import require_hosts
from .hosts import PINNED
from .mock_model import MockModelServer, Reply, RunBash, Script, WriteFile

pytestmark = pytest.mark.realhost

_DIRS = (
    '"$HOME" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_CACHE_HOME" "$XDG_STATE_HOME" '
    '"$TMPDIR" "$XDG_CACHE_HOME/opencode" "$XDG_DATA_HOME/opencode" "$SHARED_PROBE"'
)
WRITE = (
    f'for d in {_DIRS}; do mkdir -p "$d/atlante-probe" && '
    'echo "marker from $d" > "$d/atlante-probe/from-writer"; done'
)
READ = f'for d in {_DIRS}; do cat "$d/atlante-probe/from-writer" 2>/dev/null; done > seen.txt; true'


def only_control(shared: Path) -> list[str]:
    """Return the reader's check: exactly one marker seen, the shared control's."""
    return [
        sys.executable,
        "-c",
        "import pathlib,sys; lines = pathlib.Path('seen.txt').read_text().splitlines(); "
        f"sys.exit(lines != ['marker from ' + {str(shared)!r}])",
    ]


@pytest.mark.parametrize("host", HOSTS)
def test_cache_writes_of_one_trial_do_not_reach_the_next(host: str, tmp_path: Path) -> None:
    """The writer's markers reach only the shared control; both trials pass."""
    bin_dir = require_hosts()
    shared = tmp_path / "shared"
    shared.mkdir()
    model = "mock-model" if host == "claude-code" else "mock/mock-model"
    scripts = [
        Script("writer", [WriteFile("hello.txt", "hello\n"), RunBash(WRITE), Reply("done")]),
        Script("reader", [RunBash(READ), Reply("done")]),
    ]
    scenarios = [
        scenario(
            "a-writer",
            prompt="Write hello.txt and fill the caches. [script:writer]",
            checks=[
                {"type": "file-contains", "path": "hello.txt", "pattern": "hello"},
                {"type": "diff-allowlist", "allow": ["hello.txt"]},
            ],
        ),
        scenario(
            "b-reader",
            prompt="Look for markers. [script:reader]",
            checks=[
                {"type": "command", "run": only_control(shared)},
                {"type": "diff-allowlist", "allow": ["seen.txt"]},
            ],
        ),
    ]
    with (
        MockModelServer(scripts) as mock,
        real_host_environment(
            host,
            mock,
            tmp_path,
            bin_dir=bin_dir,
            marker="cache-test",
            extra={"SHARED_PROBE": str(shared)},
        ) as pass_env,
    ):
        project = make_project(
            tmp_path / "project",
            host=host,
            scenarios=scenarios,
            eval_extra={
                "model": model,
                "budget": {"trials": 1, "maxTokens": 400_000},
                "hostVersion": PINNED[host],
            },
        )
        report = anyio.run(
            lambda: run_eval(
                project, jobs=1, out=tmp_path / "out", pass_env=[*pass_env, "SHARED_PROBE"]
            )
        )
    writer = report.scenarios["a-writer"].trials[0]
    reader = report.scenarios["b-reader"].trials[0]
    assert writer.verdict == "pass", (writer.error, writer.checks)
    # the control: the writer did write, and a shared place is visible to the reader
    assert (shared / "atlante-probe" / "from-writer").read_text() == f"marker from {shared}\n"
    assert reader.verdict == "pass", (reader.error, reader.checks)
    assert reader.changed_files is not None
    assert "seen.txt" in reader.changed_files
    assert writer.started_at is not None
    assert reader.started_at is not None
    assert writer.started_at <= reader.started_at
