"""Structured logs: structlog loads only when an event is emitted, and context still reaches it."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from atlante_eval._util.logs import bind_context, configure_logging, get_logger, unbind_context


def test_a_silent_run_path_never_imports_structlog() -> None:
    """Importing the runner and logging with logging unconfigured leaves structlog unloaded."""
    code = (
        "import sys, atlante_eval.run.runner\n"
        "from atlante_eval._util.logs import get_logger\n"
        "get_logger('atlante_eval.run.engine').info('trial.start', trial=0)\n"
        "print('structlog' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_json_events_carry_the_bound_context(capsys: pytest.CaptureFixture[str]) -> None:
    """With --log-format json, an event has its fields, the bound context and a level."""
    configure_logging("json")
    try:
        bind_context(run_id="r-1", host="opencode")
        get_logger("atlante_eval.run.engine").info("trial.start", scenario="s", trial=2)
        unbind_context("run_id", "host")
        get_logger("atlante_eval.run.engine").info("run.end")
    finally:
        configure_logging("none")
        logging.getLogger("atlante_eval").propagate = True
    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert first["event"] == "trial.start"
    assert (first["run_id"], first["host"], first["trial"], first["level"]) == (
        "r-1",
        "opencode",
        2,
        "info",
    )
    assert "run_id" not in second
