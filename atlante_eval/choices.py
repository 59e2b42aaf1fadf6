"""Choices and defaults shared by the CLI and the library, kept import-light.

The CLI builds its options from these at start-up, so this module imports nothing
but :mod:`typing`.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_JOBS",
    "DEFAULT_MARGIN",
    "DEFAULT_SELFTEST_JOBS",
    "DEFAULT_STATE_CAP_BYTES",
    "EXTENDED_SCENARIO_SCHEMA_URI",
    "SCENARIO_SCHEMA_URI",
    "SCHEMA_KINDS",
    "SELFTEST_HOST",
    "TOKEN_CEILING",
    "Adjust",
    "BehaviourCheckType",
    "CheckType",
    "CoreCheckType",
    "FailOn",
    "GatewayMode",
    "HistoryBackend",
    "HostName",
    "IsolationMode",
    "LogFormat",
    "ShardBalancing",
    "ToolKind",
]

#: Host sessions run at once by default. Model latency dominates a trial, so overlapping a
#: few pays off even on two cores; an OpenCode session also needs ~600 MB and about
#: a CPU-second, so more than four at once is left to an explicit ``--jobs``.
DEFAULT_JOBS = 4
#: Selftest trials run at once by default: the stand-in agents are instant, the checks are not.
DEFAULT_SELFTEST_JOBS = 4
#: The most content bytes one trial's final state may refer to (uncompressed):
#: ``--final-state-cap``'s default.
DEFAULT_STATE_CAP_BYTES = 256 * 1024 * 1024
#: Significance level of ``compare``; intervals are at ``1 - alpha``.
DEFAULT_ALPHA = 0.05
#: Largest pass-rate change ``compare`` calls "unchanged" (10 points).
DEFAULT_MARGIN = 0.1
#: Multiple-comparison adjustment across scenarios in ``compare``.
Adjust = Literal["holm", "bh", "none"]
#: When ``compare --fail-on`` exits 1.
FailOn = Literal["regressed", "any-change"]
#: The reference's six check types (``scenarios.Check``'s members).
CoreCheckType = Literal[
    "command", "file-exists", "file-absent", "file-unchanged", "file-contains", "diff-allowlist"
]
#: The behaviour checks (an atlante-eval extension): they grade the trial's transcript,
#: and only documents declaring :data:`EXTENDED_SCENARIO_SCHEMA_URI` may use them.
BehaviourCheckType = Literal[
    "skill-used",
    "subagent-used",
    "tool-used",
    "tool-not-used",
    "max-tool-calls",
    "max-turns",
    "transcript-contains",
]
#: The check types a scenario may use: the one key of every per-check table
#: (``scenarios.AnyCheck``'s members and ``checks.CHECK_KINDS``, which says everything a type does).
CheckType = Literal[CoreCheckType, BehaviourCheckType]
#: The reference's v0.1 scenario schema: the six core checks only.
SCENARIO_SCHEMA_URI = "https://atlante.sh/schema/v0.1/eval-scenario.json"
#: atlante-eval's own scenario schema: everything v0.1 admits plus the behaviour checks.
EXTENDED_SCENARIO_SCHEMA_URI = "https://atlante.sh/schema/atlante-eval/v1/eval-scenario.json"
#: The built-in hosts by configured name: the one key of every per-host table
#: (``hosts.registry.HOST_FACTORIES``, ``project.native.NATIVE_HOSTS``).
HostName = Literal["opencode", "claude-code"]
#: How trials are contained (docs/isolation.md): ``eval.isolation``, ``run --isolation``,
#: ``selftest --isolation``; resolved by ``run.isolate.resolve_isolation``.
IsolationMode = Literal["none", "os"]
#: Whether trials reach their model through the engine's gateway (docs/gateway.md):
#: ``eval.gateway``, ``run --gateway``, ``selftest --gateway``; ``off`` is the reference's way.
GatewayMode = Literal["on", "off"]
#: The history store's backends: the one key of ``history.backends.BACKENDS``.
HistoryBackend = Literal["sqlite", "postgresql"]
#: ``--balance``: how ``--shard I/N`` splits the plan (docs/scaling.md).
ShardBalancing = Literal["round-robin", "duration"]
#: ``--log-format``: structured run logs on stderr.
LogFormat = Literal["none", "console", "json"]
#: The formats whose JSON Schema ``atlante-eval schema KIND`` prints.
SCHEMA_KINDS = ("scenario", "config", "report", "transcript")
#: ``meta.host`` of a selftest report (``run --last-failed`` skips such reports).
SELFTEST_HOST = "selftest"

#: The largest token count a session records (2**53, exact as a float).
TOKEN_CEILING = 2**53

#: Host-neutral kinds of tool: what a call does, whatever the host calls the tool.
ToolKind = Literal["shell", "read", "write", "search", "skill", "subagent", "other"]
