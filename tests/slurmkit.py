"""A real single-node Slurm cluster for one test: munged, slurmctld and slurmd in a temp dir.

Everything lives in a directory of its own: the MUNGE key and socket, ``slurm.conf``,
the state, spool, pid and log files. The daemons run in the foreground as children of
the test, listen on 127.0.0.1 only (``NoInAddrAny``, ``NoCtldInAddrAny``) on free
ports, and are stopped, jobs first, when the context ends. The machine's own Slurm
or MUNGE set-up (``/etc/slurm``, ``/run/munge``) is neither used nor touched.

Debian's packages: ``slurm-wlm`` (``slurmctld``, ``slurmd``, the clients) and
``munge``; ``.ci/run`` installs them. Outside CI a machine without them skips.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: Where Debian puts the daemons (often not on a non-root PATH).
SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
#: Seconds a stopped daemon gets between SIGTERM and SIGKILL.
GRACE_S = 10.0


def _find(name: str) -> str | None:
    found = shutil.which(name)
    if found is not None:
        return found
    for directory in SBIN:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def require_slurm() -> dict[str, str]:
    """The Slurm and MUNGE programs; skip without them, but fail in CI (it installs them)."""
    found = {name: _find(name) for name in (*DAEMONS, *CLIENTS)}
    missing = sorted(name for name, path in found.items() if path is None)
    if missing:
        if os.environ.get("CI") not in (None, "", "0"):
            pytest.fail(f"{', '.join(missing)} missing: .ci/run installs slurm-wlm and munge")
        pytest.skip(f"Slurm is not installed ({', '.join(missing)}): apt-get install slurm-wlm")
    return {name: path for name, path in found.items() if path is not None}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(condition: Callable[[], object], *, alive: Callable[[], None]) -> None:
    """Poll ``condition`` until it holds; ``alive`` raises when waiting can no longer help.

    No time limit of its own: pytest-timeout ends a test that waits forever, and a
    daemon that died ends the wait at once.
    """
    while not condition():
        alive()
        time.sleep(0.1)


@dataclass
class Cluster:
    """A running single-node cluster and how to talk to it."""

    root: Path
    programs: dict[str, str]
    conf: Path
    ports: tuple[int, int]
    """slurmctld's and slurmd's ports."""
    daemons: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """The environment of a client command (and of the jobs it submits)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, name: str, *args: str, cwd: Path | None = None) -> str:
        """Run a Slurm client; return its stdout (a failure fails the test, with stderr)."""
        done = subprocess.run(
            [self.programs[name], *args],
            env=self.env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"{name} {' '.join(args)}: {done.stderr}"
        return done.stdout

    def alive(self) -> None:
        """Fail the test when a daemon has exited, with the end of its log."""
        for name, process in self.daemons.items():
            if process.poll() is not None:
                log = self.root / "log" / f"{name}.log"
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                pytest.fail(f"{name} exited with {process.returncode}:\n{tail}")

    def jobs(self) -> list[dict[str, str]]:
        """Every job slurmctld knows (finished ones too: MinJobAge keeps them an hour)."""
        out = self.run("scontrol", "show", "job", "--oneliner")
        found = []
        for line in out.splitlines():
            fields = dict(
                item.split("=", 1) for item in line.split() if "=" in item and item[0] != "="
            )
            if "JobId" in fields:
                found.append(fields)
        return found

    def queued(self) -> list[str]:
        """Ids of the jobs still pending or running."""
        return self.run("squeue", "--noheader", "--format=%i").split()

    def wait_idle(self) -> None:
        """Wait until no job is pending or running."""
        wait_until(lambda: not self.queued(), alive=self.alive)


def _conf(root: Path, ports: tuple[int, int], user: str) -> str:
    return "\n".join(
        [
            "ClusterName=atlante-test",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ports[0]}",
            f"SlurmdPort={ports[1]}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={root / 'munge' / 'munge.socket'}",
            "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny",
            f"SlurmUser={user}",
            f"SlurmdUser={user}",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={root / 'spool'}",
            f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / 'run' / 'slurmd.pid'}",
            f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            # The node claims 8 CPUs and 16 GiB whatever the machine has, so that the
            # documented --cpus-per-task=2 --mem=4G tasks all start at once.
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "MinJobAge=3600",
            "NodeName=atlante1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=8 "
            "RealMemory=16384 State=UNKNOWN",
            "PartitionName=test Nodes=atlante1 Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def _start(cluster: Cluster, name: str, argv: list[str]) -> None:
    log = (cluster.root / "log" / f"{name}.out").open("wb")
    with log:
        cluster.daemons[name] = subprocess.Popen(
            argv, env=cluster.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _node_idle(cluster: Cluster) -> bool:
    state = cluster.run("sinfo", "--noheader", "--format=%t").strip()
    return state == "idle"


@contextlib.contextmanager
def slurm_cluster() -> Iterator[Cluster]:
    """Start munged, slurmctld and slurmd; yield the cluster; stop everything."""
    programs = require_slurm()
    # A short path: the MUNGE socket's path must fit a sockaddr_un (108 bytes).
    root = Path(tempfile.mkdtemp(prefix="atl-slurm-"))
    for sub in ("munge", "state", "spool", "run", "log"):
        (root / sub).mkdir(mode=0o755)
    root.chmod(0o755)
    ports = (free_port(), free_port())
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, ports, getpass.getuser()), encoding="utf-8")
    cluster = Cluster(root=root, programs=programs, conf=conf, ports=ports)
    try:
        _start_daemons(cluster)
        yield cluster
    finally:
        _shutdown(cluster)
        shutil.rmtree(root, ignore_errors=True)


def _start_daemons(cluster: Cluster) -> None:
    root, programs = cluster.root, cluster.programs
    key = root / "munge" / "munge.key"
    subprocess.run([programs["mungekey"], "--create", f"--keyfile={key}"], check=True)
    socket_path = root / "munge" / "munge.socket"
    _start(
        cluster,
        "munged",
        [
            programs["munged"],
            "--foreground",
            "--force",
            f"--socket={socket_path}",
            f"--key-file={key}",
            f"--pid-file={root / 'run' / 'munged.pid'}",
            f"--log-file={root / 'log' / 'munged.log'}",
            f"--seed-file={root / 'munge' / 'munged.seed'}",
        ],
    )
    wait_until(socket_path.exists, alive=cluster.alive)
    conf = str(cluster.conf)
    _start(cluster, "slurmctld", [programs["slurmctld"], "-D", "-c", "-f", conf])
    wait_until(lambda: _pings(cluster), alive=cluster.alive)
    _start(cluster, "slurmd", [programs["slurmd"], "-D", "-N", "atlante1", "-f", conf])
    wait_until(lambda: _node_idle(cluster), alive=cluster.alive)


def _pings(cluster: Cluster) -> bool:
    done = subprocess.run(
        [cluster.programs["scontrol"], "ping"],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=False,
    )
    return "is UP" in done.stdout


def _shutdown(cluster: Cluster) -> None:
    """Cancel what still runs, stop the daemons (slurmd first), then MUNGE."""
    if "slurmctld" in cluster.daemons and cluster.daemons["slurmctld"].poll() is None:
        with contextlib.suppress(AssertionError, OSError):
            left = cluster.queued()
            if left:
                cluster.run("scancel", *left)
    for name in ("slurmd", "slurmctld", "munged"):
        if name in cluster.daemons:
            _stop(cluster.daemons[name])


def listening(port: int) -> list[str]:
    """The local addresses (``ip:port`` in hex, as /proc/net/tcp has them) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state = fields[1], fields[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    found.append(local)
    return found
