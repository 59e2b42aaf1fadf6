#!/usr/bin/env python3
"""A stand-in coding-agent host: reads a script of actions on stdin and performs them.

The prompt *is* the script: a JSON object ``{"actions": [...]}`` (anything else is
treated as ``{"actions": []}``). It prints JSON events in an OpenCode-like stream
format (``step_finish`` with ``part.tokens.total`` and ``part.cost``) so the engine's
streaming, budgets and grading can be tested with a real subprocess.

Actions (each a one-key object, or with extra keys as noted):
  {"write": PATH, "content": TEXT}      write a file (parents created)
  {"append": PATH, "content": TEXT}     append to a file
  {"delete": PATH}                      remove a file or directory tree
  {"mkdir": PATH}
  {"symlink": PATH, "target": TARGET}   create a symbolic link
  {"chmod": PATH, "mode": INT}
  {"run": [ARGV...]}                    run a program (no shell) in the sandbox
  {"sleep": SECONDS}
  {"wait_for": PATH}                    block until PATH exists (a test's go signal)
  {"usage": TOKENS, "cost": USD}        print a step_finish event (adds to the total)
  {"model": "provider/model"}           print an event naming the model
  {"event": OBJECT}                     print OBJECT as one JSON line
  {"print": TEXT} / {"stderr": TEXT}    raw line to stdout / stderr
  {"allocate_mb": MB}                   allocate (and touch) MB megabytes in this process
  {"flood": BYTES, "newlines": BOOL}    print BYTES bytes (no newline unless asked)
  {"flood": BYTES, "json": true}        print BYTES bytes of ~1 KiB JSON text events
  {"invalid_utf8": COUNT}               print invalid UTF-8 bytes and a newline
  {"ignore_sigterm": true}
  {"grandchild": SECONDS}               fork a child that sleeps holding stdout open
  {"daemon": SECONDS}                   double-fork a daemon (own session, no stdio) that sleeps
  {"close_stdout": true}                close stdout and keep running
  {"signal": "SIGKILL"}                 kill itself with a signal
  {"env_dump": PATH}                    write the environment as JSON to PATH
  {"project_write": REL, "content": TEXT}  find the user's project by walking /proc from
                                        this process up to the atlante-eval process (its
                                        cwd and `run` argument) and write REL there;
                                        `{run_dir}` in REL is the newest run directory
  {"exit": CODE}                        exit now with CODE
  {"chance": P, "seed": S, "then": [ACTIONS]}
                                        perform ACTIONS with probability P, drawn from a
                                        RNG seeded by S and the trial index (env
                                        ATLANTE_STANDIN_TRIAL): fixed and reproducible;
                                        P may be "env:NAME" (read from that variable)
  {"trials": [I, ...], "then": [ACTIONS]}
                                        perform ACTIONS only in the trials with these
                                        indices (env ATLANTE_STANDIN_TRIAL)
  {"attack": NAME, "args": [...]}       try an isolation breach (below); write its outcome
                                        as one JSON line to attack-NAME.json and stdout
  {"wait_fifo": PATH}                   create a FIFO at PATH and block until a writer opens it
  {"forge": TEXT, "pad": BYTES}         an agent's tool (a child process) writes TEXT, as is (no
                                        newline added), then BYTES bytes of "x" (default 0),
                                        into this host's stdout through /proc/<host pid>/fd/1,
                                        as a hostile agent would
  {"forge_calls": COUNT, "size": BYTES} the same, COUNT lines each holding a Claude Code
                                        ``tool_use`` event (its own id) with an input of BYTES

Isolation attacks (docs/isolation.md), also runnable from a setup or command check
as ``python standin_host.py --attack NAME ARGS...`` (prints the outcome line and writes
attack-NAME.json). Each
outcome is ``{"attack": NAME, "breached": BOOL, "detail": TEXT}``; an attack never
fails the process, so the trial's verdict stays the task's.
  read PATH                  read a file outside the sandbox (breached: read it)
  write PATH TEXT            append TEXT to a file outside the sandbox
  siblings TEXT              write solved.txt (TEXT) into every other trial's sandbox
                             found beside this one (../*/project)
  kill PID                   SIGKILL a process outside
  ptrace PID                 PTRACE_ATTACH to a process outside (then detach)
  connect HOST PORT          resolve HOST and connect to HOST:PORT directly, then through
                             $HTTPS_PROXY with CONNECT (breached: either got through)
  daemon TOKEN               leave a setsid daemon with a scrubbed environment running
                             ``sleep`` with TOKEN in its command line
  proc PATH TEXT             append TEXT to the absolute PATH through /proc/1/root and
                             through /proc/<each ancestor>/cwd (PATH relative to that cwd)
  symlink TARGET             plant a symlink to TARGET in the sandbox and read through it
  fetch URL                  GET URL with urllib (which honours HTTP_PROXY)
  exit0 PID                  PTRACE_ATTACH to PID ("parent": this process's parent) and
                             make it call exit_group(0) at once (x86-64)
  vmread PID                 read a word of PID's memory with process_vm_readv
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    raw = sys.stdin.read()
    try:
        script = json.loads(raw)
    except ValueError:
        script = {}
    actions = script.get("actions", []) if isinstance(script, dict) else []
    # Read as Claude Code (tests/standin_claude.py), it prints only what its script says.
    quiet = os.environ.get("ATLANTE_STANDIN_DIALECT") == "claude"
    if not quiet:
        emit({"type": "step_start"})
    for action in actions:
        code = perform(action)
        if code is not None:
            return code
    if not quiet:
        emit({"type": "text", "part": {"text": "done"}})
    return 0


#: Memory an ``allocate_mb`` action holds for the rest of the session.
HELD: list[bytes] = []


def perform(action: dict[str, object]) -> int | None:  # noqa: C901, PLR0915 - one branch per scripted action
    if "write" in action:
        path = Path(str(action["write"]))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(action.get("content", "")), encoding="utf-8")
    elif "append" in action:
        with open(str(action["append"]), "a", encoding="utf-8") as handle:
            handle.write(str(action.get("content", "")))
    elif "delete" in action:
        path = Path(str(action["delete"]))
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    elif "mkdir" in action:
        Path(str(action["mkdir"])).mkdir(parents=True, exist_ok=True)
    elif "symlink" in action:
        os.symlink(str(action["target"]), str(action["symlink"]))
    elif "chmod" in action:
        os.chmod(str(action["chmod"]), int(action["mode"]))  # type: ignore[call-overload]
    elif "run" in action:
        subprocess.run([str(a) for a in action["run"]], check=False)  # type: ignore[attr-defined]
    elif "wait_for" in action:
        while not os.path.lexists(str(action["wait_for"])):
            time.sleep(0.01)
    elif "sleep" in action:
        time.sleep(float(action["sleep"]))  # type: ignore[arg-type]
    elif "allocate_mb" in action:
        HELD.extend(b"x" * (1 << 20) for _ in range(int(action["allocate_mb"])))  # type: ignore[call-overload]
    elif "usage" in action:
        emit(
            {
                "type": "step_finish",
                "part": {"tokens": {"total": action["usage"]}, "cost": action.get("cost", 0)},
            }
        )
    elif "model" in action:
        emit({"type": "step_start", "model": action["model"]})
    elif "event" in action:
        emit(action["event"])  # type: ignore[arg-type]
    elif "print" in action:
        sys.stdout.write(str(action["print"]) + "\n")
        sys.stdout.flush()
    elif "stderr" in action:
        sys.stderr.write(str(action["stderr"]) + "\n")
        sys.stderr.flush()
    elif "flood" in action:
        if action.get("json"):
            flood_json(int(action["flood"]))  # type: ignore[call-overload]
        else:
            flood(int(action["flood"]), newlines=bool(action.get("newlines")))  # type: ignore[call-overload]
    elif "invalid_utf8" in action:
        sys.stdout.buffer.write(b"\xff\xfe\xfd" * int(action["invalid_utf8"]) + b"\n")  # type: ignore[call-overload]
        sys.stdout.flush()
    elif "ignore_sigterm" in action:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif "grandchild" in action:
        if os.fork() == 0:
            time.sleep(float(action["grandchild"]))  # type: ignore[arg-type]
            os._exit(0)
    elif "daemon" in action:
        daemon(float(action["daemon"]))  # type: ignore[arg-type]
    elif "close_stdout" in action:
        sys.stdout.flush()
        os.close(1)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    elif "signal" in action:
        os.kill(os.getpid(), getattr(signal, str(action["signal"])))
        time.sleep(5)
    elif "env_dump" in action:
        Path(str(action["env_dump"])).write_text(json.dumps(dict(os.environ)), encoding="utf-8")
    elif "chance" in action:
        trial = os.environ.get("ATLANTE_STANDIN_TRIAL", "0")
        draw = random.Random(f"{action.get('seed', 0)}:{trial}").random()  # noqa: S311 - a test
        chance = str(action["chance"])
        if chance.startswith("env:"):  # the pass rate from the environment (--pass-env)
            chance = os.environ.get(chance[4:], "0")
        if draw < float(chance):
            for step in action.get("then", []):  # type: ignore[attr-defined]
                code = perform(step)
                if code is not None:
                    return code
    elif "trials" in action:
        if int(os.environ.get("ATLANTE_STANDIN_TRIAL", "0")) in action["trials"]:  # type: ignore[operator]
            for step in action.get("then", []):  # type: ignore[attr-defined]
                code = perform(step)
                if code is not None:
                    return code
    elif "project_write" in action:
        target = find_project() / str(action["project_write"]).replace("{run_dir}", newest_run())
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(str(action.get("content", "")), encoding="utf-8")
    elif "exit" in action:
        sys.stdout.flush()
        return int(str(action["exit"]))
    elif "attack" in action:
        name = str(action["attack"])
        outcome = json.dumps(attack(name, [str(a) for a in action.get("args", [])]))  # type: ignore[attr-defined]
        Path(f"attack-{name}.json").write_text(outcome + "\n", encoding="utf-8")
        sys.stderr.write(outcome + "\n")
    elif "forge" in action:
        forge(str(action["forge"]), pad=int(action.get("pad", 0)))  # type: ignore[call-overload]
    elif "forge_calls" in action:
        forge_calls(int(action["forge_calls"]), int(action.get("size", 0)))  # type: ignore[call-overload]
    elif "wait_fifo" in action:
        fifo = str(action["wait_fifo"])
        os.mkfifo(fifo)
        with open(fifo, "rb") as gate:
            gate.read()
    return None


def find_project() -> Path:
    """Walk /proc from this process up to the atlante-eval process; return its project."""
    pid = os.getpid()
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if not any(b"standin_cli" in arg or b"atlante-eval" in arg for arg in argv[:2]):
            continue
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        rest = [os.fsdecode(arg) for arg in argv[argv.index(b"run") + 1 :] if arg]
        positional = [arg for arg in rest if not arg.startswith("-")]
        return cwd / positional[0] if positional else cwd
    raise SystemExit("atlante-eval process not found")


def newest_run() -> str:
    """The newest run directory's name under the project's .atlante/eval."""
    base = find_project() / ".atlante" / "eval"
    return max((p for p in base.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime).name


def attack(name: str, args: list[str]) -> dict[str, object]:
    """Try the isolation breach ``name``; return whether it got through and how."""
    try:
        breached, detail = ATTACKS[name](*args)
    except Exception as exc:  # noqa: BLE001 - a refused breach is the expected outcome
        breached, detail = False, f"{type(exc).__name__}: {exc}"
    return {"attack": name, "breached": breached, "detail": detail}


def _read(path: str) -> tuple[bool, str]:
    return True, Path(path).read_text(encoding="utf-8")


def _write(path: str, text: str) -> tuple[bool, str]:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)
    return True, f"appended to {path}"


def _siblings(text: str) -> tuple[bool, str]:
    mine = Path.cwd().resolve()
    written = []
    for other in sorted(mine.parent.parent.glob("*/project")):
        if other.resolve() != mine:
            (other / "solved.txt").write_text(text, encoding="utf-8")
            written.append(str(other))
    return bool(written), f"wrote into {written}"


def _kill(pid: str) -> tuple[bool, str]:
    os.kill(int(pid), signal.SIGKILL)
    return True, f"killed {pid}"


def _ptrace(pid: str) -> tuple[bool, str]:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    attach, detach = 16, 17
    if libc.ptrace(attach, int(pid), None, None) != 0:
        return False, f"PTRACE_ATTACH failed: {os.strerror(ctypes.get_errno())}"
    os.waitpid(int(pid), 0)
    libc.ptrace(detach, int(pid), None, None)
    return True, f"attached to {pid}"


def _connect(host: str, port: str) -> tuple[bool, str]:
    import socket

    details = []
    try:
        address = socket.getaddrinfo(host, int(port), socket.AF_INET, socket.SOCK_STREAM)[0][4]
        with socket.create_connection((str(address[0]), int(address[1])), timeout=10) as conn:
            conn.sendall(b"direct\n")
        return True, f"connected directly to {address}"
    except OSError as exc:
        details.append(f"direct: {exc}")
    proxy = os.environ.get("HTTPS_PROXY")
    if proxy:
        from urllib.parse import urlsplit

        parts = urlsplit(proxy)
        with socket.create_connection((parts.hostname, parts.port or 80), timeout=10) as conn:
            conn.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            reply = conn.recv(4096).decode("latin-1")
            if reply.startswith("HTTP/1.1 200"):
                conn.sendall(b"proxied\n")
                return True, "connected through the proxy"
            details.append(f"proxy: {reply.splitlines()[0] if reply else 'closed'}")
    return False, "; ".join(details)


def _daemon(token: str) -> tuple[bool, str]:
    ready_read, ready_write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.write(ready_write, b"x")
            clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            # A shell that stays (TOKEN is its $0) so the test can find the daemon.
            os.execve("/bin/sh", ["/bin/sh", "-c", "sleep 600; :", token], clean)  # noqa: S606
        os._exit(0)
    os.close(ready_write)
    os.read(ready_read, 1)
    os.close(ready_read)
    return True, "daemon started"


def _proc(path: str, text: str) -> tuple[bool, str]:
    reached = []
    try:
        _write(f"/proc/1/root{path}", text)
        reached.append("/proc/1/root")
    except OSError:
        pass
    pid = os.getppid()
    while pid > 1:
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            relative = os.path.relpath(path, cwd)
            if not relative.startswith(".."):
                _write(f"/proc/{pid}/cwd/{relative}", text)
                reached.append(f"/proc/{pid}/cwd")
            stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            break
    return bool(reached), f"reached {path} through {reached}"


def _symlink(target: str) -> tuple[bool, str]:
    link = Path("planted-link")
    link.unlink(missing_ok=True)
    link.symlink_to(target)
    return True, link.read_text(encoding="utf-8")


def _fetch(url: str) -> tuple[bool, str]:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - test URL
        return response.status == 200, response.read().decode("utf-8", "replace")


def _exit0(pid: str) -> tuple[bool, str]:
    """Make ``pid`` (stopped in a system call) run ``exit_group(0)``: a forged clean exit."""
    import ctypes

    target = os.getppid() if pid == "parent" else int(pid)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    libc.ptrace.restype = ctypes.c_long
    attach, getregs, setregs, detach = 16, 12, 13, 17
    if libc.ptrace(attach, target, None, None) != 0:
        return False, f"PTRACE_ATTACH failed: {os.strerror(ctypes.get_errno())}"
    os.waitpid(target, 0x40000000)  # __WALL: a tracee is waited for like a child
    regs = (ctypes.c_ulong * 27)()  # struct user_regs_struct on x86-64
    libc.ptrace(getregs, target, None, ctypes.byref(regs))
    rax, rdi, orig_rax, rip = 10, 14, 15, 16
    regs[orig_rax] = 2**64 - 1  # no system call to restart
    regs[rax], regs[rdi] = 231, 0  # exit_group(0)
    regs[rip] -= 2  # back onto the ``syscall`` instruction it was stopped after
    libc.ptrace(setregs, target, None, ctypes.byref(regs))
    libc.ptrace(detach, target, None, None)
    return True, f"made {target} exit 0"


def _vmread(pid: str) -> tuple[bool, str]:
    import ctypes

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(8)
    local = IoVec(ctypes.cast(buffer, ctypes.c_void_p), 8)
    remote = IoVec(ctypes.cast(buffer, ctypes.c_void_p), 8)  # same layout: same address
    read = libc.process_vm_readv(
        int(pid), ctypes.byref(local), 1, ctypes.byref(remote), 1, ctypes.c_ulong(0)
    )
    if read < 0:
        return False, f"process_vm_readv failed: {os.strerror(ctypes.get_errno())}"
    return True, f"read {read} bytes of {pid}"


ATTACKS: dict[str, Callable[..., tuple[bool, str]]] = {
    "exit0": _exit0,
    "vmread": _vmread,
    "fetch": _fetch,
    "read": _read,
    "write": _write,
    "siblings": _siblings,
    "kill": _kill,
    "ptrace": _ptrace,
    "connect": _connect,
    "daemon": _daemon,
    "proc": _proc,
    "symlink": _symlink,
}


_FORGER = """
import os, sys
fd = os.open(f"/proc/{os.getppid()}/fd/1", os.O_WRONLY)
for data in (sys.argv[1].encode(), b"x" * int(sys.argv[2])):
    while data:
        data = data[os.write(fd, data):]
os.close(fd)
"""


def forge(text: str, *, pad: int = 0) -> None:
    """Write ``text`` (then ``pad`` bytes) into this host's stdout from a child, through /proc."""
    subprocess.run([sys.executable, "-c", _FORGER, text, str(pad)], check=True)


_CALL_FORGER = """
import json, os, sys
count, size = int(sys.argv[1]), int(sys.argv[2])
fd = os.open(f"/proc/{os.getppid()}/fd/1", os.O_WRONLY)
for i in range(count):
    block = {"type": "tool_use", "id": f"forged-call-{i}", "name": "Bash",
             "input": {"command": "x" * size}}
    event = {"type": "assistant", "message": {"id": f"forged-{i}", "content": [block]}}
    data = (json.dumps(event) + "\\n").encode()
    while data:
        data = data[os.write(fd, data):]
os.close(fd)
"""


def forge_calls(count: int, size: int) -> None:
    """Forge ``count`` tool_use events with ``size``-byte inputs, from a child, through /proc."""
    subprocess.run([sys.executable, "-c", _CALL_FORGER, str(count), str(size)], check=True)


def daemon(seconds: float) -> None:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            time.sleep(seconds)
        os._exit(0)


def flood_json(count: int) -> None:
    line = (json.dumps({"type": "text", "part": {"text": "x" * 990}}) + "\n").encode()
    out = sys.stdout.buffer
    for _ in range(max(1, count // len(line))):
        out.write(line)
    out.flush()


def flood(count: int, *, newlines: bool) -> None:
    chunk = (b"x" * 1023 + b"\n") if newlines else b"x" * 1024
    out = sys.stdout.buffer
    remaining = count
    while remaining > 0:
        piece = chunk[: min(len(chunk), remaining)]
        out.write(piece)
        remaining -= len(piece)
    out.write(b"\n")
    out.flush()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--attack"]:
        outcome = json.dumps(attack(sys.argv[2], sys.argv[3:]))
        Path(f"attack-{sys.argv[2]}.json").write_text(outcome + "\n", encoding="utf-8")
        print(outcome)
        sys.exit(0)
    sys.exit(main())
