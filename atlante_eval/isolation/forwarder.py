"""Relay a confined tree's TCP connections to the engine's filtering proxy.

Runs *inside* the sandbox, with the standard library only (``python3 -I -S``)::

    forwarder.py SOCKET PROXY_PORT PORTS -- ARGV...

It listens on ``127.0.0.1:PROXY_PORT`` (the HTTP proxy the environment names)
and on ``127.0.0.1:P`` for each comma-separated loopback port in ``PORTS``, then
runs ``ARGV`` and exits with its status. A connection to the proxy port is
relayed as is to the Unix socket ``SOCKET``; a connection to a loopback port
asks the proxy for ``CONNECT 127.0.0.1:P`` first, so the engine decides every
destination. Nothing here decides anything.

It uses the C modules ``_socket``, ``_thread`` and ``_signal`` instead of
``socket``, ``threading`` and ``signal``: their pure-Python wrappers import
``enum`` and friends, which doubled this start-up-bound relay's cost per session.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub; signal would import enum
import _socket
import _thread
import os
import sys
from _collections_abc import Callable  # loaded at start-up already, unlike collections.abc

_CHUNK = 65536


def _start(target: Callable[..., None], *args: object) -> _thread.LockType:
    """Run ``target(*args)`` in a new thread; the returned lock is released when it ends."""
    done = _thread.allocate_lock()
    done.acquire()

    def run() -> None:
        try:
            target(*args)
        finally:
            done.release()

    _thread.start_new_thread(run, ())
    return done


def _pipe(source: _socket.socket, target: _socket.socket) -> None:
    try:
        while True:
            data = source.recv(_CHUNK)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:  # noqa: SIM105 - contextlib costs this start-up-bound script ~10 ms
                sock.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass


def _tunnel(client: _socket.socket, path: str, port: int) -> None:
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(path)
        if port:
            upstream.sendall(
                f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
            )
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 8192:
                chunk = upstream.recv(1)
                if not chunk:
                    break
                head += chunk
            if not head.startswith(b"HTTP/1.1 200"):
                return
        back = _start(_pipe, upstream, client)
        _pipe(client, upstream)
        back.acquire()  # the other direction is done too
    except OSError:
        pass
    finally:
        client.close()
        upstream.close()


def _serve(listener: _socket.socket, path: str, port: int) -> None:
    while True:
        try:
            fd, _ = listener._accept()  # type: ignore[attr-defined]  # the C-level accept
            client = _socket.socket(fileno=fd)
        except OSError:
            return
        _start(_tunnel, client, path, port)


def _listen(port: int) -> _socket.socket:
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener


def main(args: list[str]) -> int:
    path, proxy_port, ports = args[0], int(args[1]), [int(p) for p in args[2].split(",") if p]
    argv = args[4:]
    for port, forwarded in [(proxy_port, 0)] + [(p, p) for p in ports]:
        listener = _listen(port)
        _start(_serve, listener, path, forwarded)
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)  # noqa: S606 - the confined command, by design
        except OSError as exc:
            os.write(2, f"{argv[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(sig, lambda number, _frame: os.kill(child, number))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number not in (_signal.SIGKILL, _signal.SIGSTOP):  # neither can be re-armed
            _signal.signal(number, _signal.SIG_DFL)
        os.kill(os.getpid(), number)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    # os._exit: the relay threads are still blocked in accept() and recv().
    os._exit(main(sys.argv[1:]))
