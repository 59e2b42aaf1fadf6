"""What a real host costs per trial, run through atlante-eval against the mock model.

The real ``claude`` and ``opencode`` CLIs (``ATLANTE_EVAL_HOST_BIN_DIR``, else the
pinned versions in the managed host cache, as the real-host tests find them) run
``TRIALS`` one-trial scenarios at ``--jobs 1`` and at ``--jobs 2`` against the
scripted mock model server of ``tests/realhost`` on 127.0.0.1 (the mock is also
the hosts' HTTP(S) proxy, so other traffic is seen and
refused). Each scenario writes ``hello.txt``, runs one shell command and answers;
its checks must pass. Per trial the bench records, from a metering wrapper around
the host binary (:mod:`bench.hostmeter`): the host's CPU-seconds (user + system of
the session's whole process tree, from ``wait4``), its wall time and peak RSS; from
the kept trial directory: the files the host wrote outside the sandbox (its state
directory, by top directory); from the mock's log: the model calls, by purpose
(``task`` turns, ``title`` generation, other side calls, anything else).

Each host runs in two profiles in the same process, so the figures compare as
ratios: ``before`` (the host environment and configuration atlante-eval wrote
before issue 17) and ``after`` (today's); plus ``bare`` (the host started directly in
a fresh isolated HOME) and, for OpenCode, ``bare + trial configuration`` (the host
started directly as bare, but on a copy of each ``after --jobs 1`` trial as the
engine prepared it, with the session's own argv and environment). Wall figures
depend on the machine's load; CPU-seconds, request and file counts do not.

Run from the repository root: ``python -m bench hosts`` (``BENCH_HOSTS_TRIALS``
sets the trials per run, default 3; ``BENCH_HOSTS`` picks ``opencode``,
``claude-code`` or both).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from atlante_eval import Host, SessionEnd, SessionUsage, TrialContext, run_eval
from atlante_eval.hosts.claude_code import CLAUDE_DEFAULT_ENV, ClaudeCodeHost, claude_settings
from atlante_eval.hosts.opencode import OPENCODE_DEFAULT_ENV, OpenCodeHost
from atlante_eval.hosts.opencode_config import CONFIG_CANDIDATES, build_config

from .hostmeter import install_meter, read_records

_TESTS = Path(__file__).resolve().parent.parent / "tests"
if str(_TESTS) not in sys.path:
    sys.path.insert(0, str(_TESTS))  # test helpers are imported by bare name, as pytest does

from factory import make_project, scenario  # noqa: E402
from realhost.hostrun import (  # noqa: E402
    claude_env,
    opencode_config,
    opencode_env,
    proxy_trap_env,
    trust_workspace,
)
from realhost.hosts import HostsUnavailableError, locate_hosts  # noqa: E402
from realhost.mock_model import (  # noqa: E402
    MockModelServer,
    RequestRecord,
    RunBash,
    Script,
    WriteFile,
)
from realhost.mock_model import Reply as MockReply  # noqa: E402

#: Trials (one-trial scenarios) per measured run.
TRIALS = int(os.environ.get("BENCH_HOSTS_TRIALS", "3"))
#: The --jobs values measured.
JOBS = (1, 2)
_CLAUDE_FLAGS = (
    "-p",
    "--output-format",
    "stream-json",
    "--verbose",
    "--setting-sources",
    "project",
    "--strict-mcp-config",
)
_TITLE = "Generate a title for this conversation"
_MARK = re.compile(r"\[script:(t\d+)\]")
OPENCODE_PROVIDER = {
    "provider": {
        "mock": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Mock",
            "options": {"baseURL": "{env:MOCK_BASE_URL}"},
            "models": {
                "mock-model": {"tool_call": True, "limit": {"context": 128000, "output": 4096}}
            },
        }
    }
}


#: The OpenCode session defaults atlante-eval set before issue 17.
BEFORE_OPENCODE_ENV: Mapping[str, str] = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "npm_config_registry": "http://127.0.0.1:9/",
}


class BeforeOpenCode(OpenCodeHost):
    """OpenCode as atlante-eval ran it before issue 17."""

    quiet_config = False
    default_env: Mapping[str, str] = BEFORE_OPENCODE_ENV


class BeforeOpenCodePlusWatcherOff(BeforeOpenCode):
    """Before, plus only the file-watcher switch."""

    default_env: Mapping[str, str] = {
        **BEFORE_OPENCODE_ENV,
        "OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER": "1",
    }


class _OneConfigKey(BeforeOpenCode):
    """Before, plus one key of the quiet configuration (set by subclasses)."""

    quiet_config = True
    keep: str = ""

    def prepare(self, context: TrialContext) -> None:
        """Write today's configuration, then drop the quiet keys but ``keep``."""
        super().prepare(context)
        path = next(
            context.sandbox / rel
            for rel in CONFIG_CANDIDATES
            if (context.sandbox / rel).is_file() and not (context.sandbox / rel).is_symlink()
        )
        config = json.loads(path.read_text(encoding="utf-8"))
        if self.keep != "snapshot":
            config.pop("snapshot", None)
        if self.keep != "title":
            config["agent"].pop("title", None)
        path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


class BeforeOpenCodePlusTitleOff(_OneConfigKey):
    """Before, plus only ``agent.title.disable``."""

    keep = "title"


class BeforeOpenCodePlusSnapshotOff(_OneConfigKey):
    """Before, plus only ``snapshot: false``."""

    keep = "snapshot"


class CapturingOpenCode(OpenCodeHost):
    """Today's OpenCode, which also keeps a copy of each prepared trial to replay.

    Just before its session starts, the trial's sandbox and state directory (as the
    engine prepared them: ``.opencode/`` configuration, native agent and skill files,
    copied credentials) are copied into ``capture_root``, with the session's argv,
    environment and prompt, exactly as :meth:`argv` and :meth:`session_env` build them.
    """

    capture_root: Path

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Copy the prepared trial, then run the session as usual."""
        target = self.capture_root / context.scenario.name
        shutil.copytree(context.sandbox, target / "sandbox", symlinks=True)
        shutil.copytree(context.state_dir, target / "state", symlinks=True)
        captured = {
            "argv": self.argv(context),
            "env": self.session_env(context),
            "prompt": context.prompt,
            "sandbox": str(context.sandbox),
            "state": str(context.state_dir),
        }
        (target / "session.json").write_text(json.dumps(captured), encoding="utf-8")
        return await super().run_session(context, usage)


#: One-switch profiles, measured at --jobs 1 against ``before``.
ABLATIONS: Mapping[str, type[Host]] = {
    "before + title off": BeforeOpenCodePlusTitleOff,
    "before + snapshot off": BeforeOpenCodePlusSnapshotOff,
    "before + watcher off": BeforeOpenCodePlusWatcherOff,
}


class BeforeClaude(ClaudeCodeHost):
    """Claude Code as atlante-eval ran it before issue 17."""


PROFILES: Mapping[str, Mapping[str, type[Host]]] = {
    "opencode": {"before": BeforeOpenCode, "after": OpenCodeHost},
    "claude-code": {"before": BeforeClaude, "after": ClaudeCodeHost},
}


@dataclass
class Trial:
    """One measured trial."""

    verdict: str
    cpu_s: float
    wall_s: float
    maxrss_mib: float
    state_files: dict[str, int]
    state_bytes: dict[str, int]
    sandbox_host_files: int
    requests: Counter[str] = field(default_factory=Counter)


def _purpose(record: RequestRecord) -> str:
    if record.kind == "main":
        return "task"
    if record.kind == "side":
        return "title" if _TITLE in record.prompt else "side-other"
    return record.kind


def _tree(root: Path) -> tuple[dict[str, int], dict[str, int]]:
    files: Counter[str] = Counter()
    size: Counter[str] = Counter()
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            top = path.relative_to(root).parts[0]
            files[top] += 1
            size[top] += path.stat().st_size
    return dict(files), dict(size)


def scripts() -> list[Script]:
    """One identical script per trial, so the mock's log attributes calls to trials."""
    return [
        Script(f"t{i}", [WriteFile("hello.txt", "hello\n"), RunBash("true"), MockReply("done")])
        for i in range(TRIALS)
    ]


def _scenarios() -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = [
        {"type": "file-contains", "path": "hello.txt", "pattern": "hello"},
        {"type": "diff-allowlist", "allow": ["hello.txt"]},
    ]
    return [
        scenario(f"t{i}", prompt=f"Write hello.txt, then run true. [script:t{i}]", checks=checks)
        for i in range(TRIALS)
    ]


@contextlib.contextmanager
def _environ(values: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _host_environment(
    host: str, mock: MockModelServer, tmp: Path
) -> tuple[dict[str, str], list[str]]:
    variables = proxy_trap_env(mock)
    if host == "claude-code":
        variables |= {
            "ANTHROPIC_BASE_URL": mock.anthropic_base_url,
            "ANTHROPIC_API_KEY": "test-key",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
        return variables, ["CLAUDE_CODE_MAX_RETRIES"]
    data = tmp / "user-data"
    (data / "opencode").mkdir(parents=True, exist_ok=True)
    (data / "opencode" / "auth.json").write_text(json.dumps({"mock": {"type": "api", "key": "k"}}))
    variables |= {
        "XDG_DATA_HOME": str(data),
        "OPENCODE_CONFIG_CONTENT": json.dumps(OPENCODE_PROVIDER),
        "MOCK_BASE_URL": mock.openai_base_url,
    }
    return variables, ["OPENCODE_CONFIG_CONTENT", "MOCK_BASE_URL"]


def measure_run(
    host: str,
    profile: str,
    jobs: int,
    real_bin: Path,
    tmp: Path,
    capture: Path | None = None,
) -> tuple[list[Trial], float]:
    """Run TRIALS trials of ``host`` in ``profile`` at ``jobs``; return them and the run's wall."""
    work = tmp / f"{host}-{profile}-j{jobs}"
    records = work / "meter"
    binary = "claude" if host == "claude-code" else "opencode"
    wrapper = install_meter(real_bin / binary, work / "bin", records)
    model = "mock-model" if host == "claude-code" else "mock/mock-model"
    project = make_project(
        work / "project",
        host=host,
        scenarios=_scenarios(),
        eval_extra={"model": model, "budget": {"trials": 1, "maxTokens": 400_000}},
    )
    with MockModelServer(scripts()) as mock:
        variables, pass_env = _host_environment(host, mock, work)
        with _environ(variables):
            factory = {**PROFILES[host], **ABLATIONS}[profile]
            instance = factory(str(wrapper))  # type: ignore[call-arg]
            if capture is not None:
                instance = CapturingOpenCode(str(wrapper))
                instance.capture_root = capture
            started = time.perf_counter()
            report = anyio.run(
                lambda: run_eval(
                    project,
                    jobs=jobs,
                    out=work / "out",
                    keep=True,
                    host=instance,
                    pass_env=pass_env,
                )
            )
            run_wall = time.perf_counter() - started
        requests = mock.requests
    by_cwd = {r["cwd"]: r for r in read_records(records)}
    trials: list[Trial] = []
    for name, result in report.scenarios.items():
        [t] = result.trials
        assert t.sandbox is not None
        trial_dir = Path(t.sandbox)
        meter = by_cwd.get(os.path.realpath(trial_dir / "project")) or by_cwd.get(
            str(trial_dir / "project"), {}
        )
        files, size = _tree(trial_dir / "state")
        host_dir = trial_dir / "project" / (".opencode" if host == "opencode" else ".claude")
        sandbox_files = (
            sum(1 for p in host_dir.rglob("*") if p.is_file()) if host_dir.is_dir() else 0
        )
        trial = Trial(
            verdict=t.verdict,
            cpu_s=float(meter.get("user_s", 0.0)) + float(meter.get("sys_s", 0.0)),
            wall_s=float(meter.get("wall_s", 0.0)),
            maxrss_mib=float(meter.get("maxrss_kib", 0)) / 1024,
            state_files=files,
            state_bytes=size,
            sandbox_host_files=sandbox_files,
        )
        for record in requests:
            found = _MARK.search(record.prompt)
            if found and found.group(1) == name:
                trial.requests[_purpose(record)] += 1
            elif not found and name == "t0":
                trial.requests[f"unattributed-{_purpose(record)}"] += 1
        trials.append(trial)
    if report.meta.run_root:
        shutil.rmtree(report.meta.run_root, ignore_errors=True)
    return trials, run_wall


def _direct_trial(cwd: Path, state: Path) -> Trial:
    """A host run started directly: its verdict and state files (meters are added later)."""
    files, size = _tree(state)
    return Trial(
        verdict="pass" if (cwd / "hello.txt").is_file() else "fail",
        cpu_s=0.0,
        wall_s=0.0,
        maxrss_mib=0.0,
        state_files=files,
        state_bytes=size,
        sandbox_host_files=0,
    )


def _add_meters_and_requests(
    trials: list[Trial], records: Path, requests: list[RequestRecord]
) -> None:
    """Fill in each direct run's metered CPU, wall and RSS, and its model calls by purpose."""
    for trial, meter in zip(trials, read_records(records), strict=True):
        trial.cpu_s = float(meter["user_s"]) + float(meter["sys_s"])
        trial.wall_s = float(meter["wall_s"])
        trial.maxrss_mib = float(meter["maxrss_kib"]) / 1024
    for i, trial in enumerate(trials):
        for record in requests:
            found = _MARK.search(record.prompt)
            if found and found.group(1) == f"t{i}":
                trial.requests[_purpose(record)] += 1


def measure_bare(host: str, real_bin: Path, tmp: Path) -> tuple[list[Trial], float]:
    """Run the same task on the host directly, without the engine: the host's own floor.

    Each run gets a fresh isolated HOME (``tests/realhost/hostrun``) with the same
    switches the engine sets today, the containment policy as the only settings,
    and the same prompt on stdin, sequentially.
    """
    work = tmp / f"{host}-bare"
    records = work / "meter"
    binary = "claude" if host == "claude-code" else "opencode"
    wrapper = install_meter(real_bin / binary, work / "bin", records)
    trials: list[Trial] = []
    started = time.perf_counter()
    with MockModelServer(scripts()) as mock:
        for i in range(TRIALS):
            cwd = work / f"t{i}" / "project"
            cwd.mkdir(parents=True)
            state = work / f"t{i}" / "state"
            if host == "claude-code":
                env = claude_env(state, mock, **CLAUDE_DEFAULT_ENV)
                (cwd / ".claude").mkdir()
                (cwd / ".claude" / "settings.json").write_text(json.dumps(claude_settings()))
                trust_workspace(env, cwd)
                argv = [str(wrapper), *_CLAUDE_FLAGS, "--model", "mock-model"]
            else:
                config = {**build_config("v1", [], quiet=True), **opencode_config(mock)}
                config.pop("permission", None)
                config["permission"] = build_config("v1", [])["permission"]
                env = opencode_env(state, mock, config, **OPENCODE_DEFAULT_ENV)
                env.pop("OPENCODE_DISABLE_DEFAULT_PLUGINS", None)
                argv = [str(wrapper), "run", "--format", "json", "--model", "mock/mock-model"]
            prompt = f"Write hello.txt, then run true. [script:t{i}]"
            subprocess.run(argv, input=prompt.encode(), cwd=cwd, env=env, capture_output=True)
            trials.append(_direct_trial(cwd, state))
        requests = mock.requests
    _add_meters_and_requests(trials, records, requests)
    return trials, time.perf_counter() - started


def measure_replay(real_bin: Path, capture: Path, tmp: Path) -> tuple[list[Trial], float]:
    """Bare + the trial's configuration: the captured trials, host started directly.

    Each trial that :class:`CapturingOpenCode` kept is replayed as ``bare`` runs the
    host (``subprocess.run``, the prompt on stdin, sequentially, a fresh mock), but in
    a copy of the sandbox and state directory the engine prepared, with the session's
    own argv and environment (paths and the mock's port rewritten to the copies).
    """
    work = tmp / "opencode-replay"
    records = work / "meter"
    wrapper = install_meter(real_bin / "opencode", work / "bin", records)
    trials: list[Trial] = []
    started = time.perf_counter()
    with MockModelServer(scripts()) as mock:
        for i in range(TRIALS):
            shutil.copytree(capture / f"t{i}", work / f"t{i}", symlinks=True)
            captured = json.loads((work / f"t{i}" / "session.json").read_text(encoding="utf-8"))
            cwd, state = work / f"t{i}" / "sandbox", work / f"t{i}" / "state"
            old_port = re.search(r"127\.0\.0\.1:(\d+)", captured["env"]["HTTP_PROXY"])
            assert old_port is not None

            moves = {
                captured["sandbox"]: str(cwd),
                captured["state"]: str(state),
                f"127.0.0.1:{old_port.group(1)}": f"127.0.0.1:{mock.port}",
            }
            env = dict(captured["env"])
            for old, new in moves.items():
                env = {k: v.replace(old, new) for k, v in env.items()}
            argv = [str(wrapper), *captured["argv"][1:]]
            subprocess.run(
                argv, input=captured["prompt"].encode(), cwd=cwd, env=env, capture_output=True
            )
            trials.append(_direct_trial(cwd, state))
        requests = mock.requests
    _add_meters_and_requests(trials, records, requests)
    return trials, time.perf_counter() - started


def summarize(trials: list[Trial], run_wall: float) -> dict[str, Any]:
    """Per-trial means (and the run's wall) of one measured run."""
    state_files: Counter[str] = Counter()
    state_bytes: Counter[str] = Counter()
    requests: Counter[str] = Counter()
    for t in trials:
        state_files.update(t.state_files)
        state_bytes.update(t.state_bytes)
        requests.update(t.requests)
    n = len(trials)
    return {
        "verdicts": sorted(Counter(t.verdict for t in trials).items()),
        "host_cpu_s": round(statistics.mean(t.cpu_s for t in trials), 3),
        "host_cpu_s_each": [round(t.cpu_s, 2) for t in trials],
        "host_wall_s": round(statistics.mean(t.wall_s for t in trials), 3),
        "peak_rss_mib": round(max(t.maxrss_mib for t in trials), 1),
        "run_wall_s": round(run_wall, 2),
        "state_files_per_trial": {k: round(v / n, 1) for k, v in sorted(state_files.items())},
        "state_kib_per_trial": {k: round(v / n / 1024, 1) for k, v in sorted(state_bytes.items())},
        "sandbox_host_files_per_trial": round(
            statistics.mean(t.sandbox_host_files for t in trials), 1
        ),
        "model_calls_per_trial": {k: round(v / n, 2) for k, v in sorted(requests.items())},
    }


def versions(real_bin: Path) -> dict[str, str]:
    """The machine and the host versions the figures come from."""
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    found = {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "load_average_at_start": f"{os.getloadavg()[0]:.1f}",
    }
    for name in ("claude", "opencode"):
        out = subprocess.run([str(real_bin / name), "--version"], capture_output=True, text=True)
        found[name] = out.stdout.strip()
    return found


def main() -> None:
    """Measure both hosts in both profiles at --jobs 1 and 2; print the figures and ratios."""
    try:
        real_bin = Path(os.environ.get("ATLANTE_EVAL_HOST_BIN_DIR") or locate_hosts())
    except HostsUnavailableError as exc:
        print(f"skipped: the real hosts are unavailable ({exc})")
        return
    hosts = os.environ.get("BENCH_HOSTS", "opencode,claude-code").split(",")
    tmp = Path(tempfile.mkdtemp(prefix="atlante-bench-hosts-"))
    results: dict[str, Any] = {"machine": versions(real_bin), "trials_per_run": TRIALS}
    try:
        for host in hosts:
            trials, wall = measure_bare(host, real_bin, tmp)
            results[f"{host} bare (no engine)"] = summarize(trials, wall)
            print(f"{host} bare", json.dumps(results[f"{host} bare (no engine)"]), flush=True)
            for jobs in JOBS:
                for profile in PROFILES[host]:
                    capture = (
                        tmp / "capture"
                        if (host, profile, jobs) == ("opencode", "after", 1)
                        else None
                    )
                    trials, wall = measure_run(host, profile, jobs, real_bin, tmp, capture)
                    key = f"{host} {profile} --jobs {jobs}"
                    results[key] = summarize(trials, wall)
                    print(key, json.dumps(results[key]), flush=True)
                before = results[f"{host} before --jobs {jobs}"]
                after = results[f"{host} after --jobs {jobs}"]
                if jobs == 1 and host == "opencode":
                    for name in ABLATIONS:
                        trials, wall = measure_run(host, name, jobs, real_bin, tmp)
                        one = summarize(trials, wall)
                        results[f"{host} {name} --jobs 1"] = one
                        print(f"{host} {name} --jobs 1", json.dumps(one), flush=True)
                        results[f"{host} {name}: before/this CPU"] = round(
                            before["host_cpu_s"] / max(one["host_cpu_s"], 1e-9), 2
                        )
                if jobs == 1 and host == "opencode":
                    trials, wall = measure_replay(real_bin, tmp / "capture", tmp)
                    replay = summarize(trials, wall)
                    results[f"{host} bare + trial configuration"] = replay
                    print(f"{host} bare + trial configuration", json.dumps(replay), flush=True)
                    results[f"{host} engine after / bare + trial configuration CPU"] = round(
                        after["host_cpu_s"] / max(replay["host_cpu_s"], 1e-9), 2
                    )
                if jobs == 1:
                    bare = results[f"{host} bare (no engine)"]
                    results[f"{host} engine after / bare host CPU"] = round(
                        after["host_cpu_s"] / max(bare["host_cpu_s"], 1e-9), 2
                    )
                results[f"{host} --jobs {jobs} before/after"] = {
                    "host_cpu_s": round(before["host_cpu_s"] / max(after["host_cpu_s"], 1e-9), 2),
                    "host_wall_s": round(
                        before["host_wall_s"] / max(after["host_wall_s"], 1e-9), 2
                    ),
                    "run_wall_s": round(before["run_wall_s"] / max(after["run_wall_s"], 1e-9), 2),
                }
        print(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
