"""Relay a confined tree's TCP connections to the engine's filtering proxy.

Runs *inside* the sandbox, with the standard library only (``python3 -I -S``)::

    forwarder.py SOCKET PROXY_PORT PORTS -- ARGV...

It listens on ``127.0.0.1:PROXY_PORT`` (the HTTP proxy the environment names)
and on ``127.0.0.1:P`` for each comma-separated loopback port in ``PORTS``, then
runs ``ARGV`` and exits with its status. A connection to the proxy port is
relayed as is to the Unix socket ``SOCKET``; a connection to a loopback port
asks the proxy for ``CONNECT 127.0.0.1:P`` first, so the engine decides every
destination. Nothing here decides anything.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

_CHUNK = 65536


def _pipe(source: socket.socket, target: socket.socket) -> None:
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
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _tunnel(client: socket.socket, path: str, port: int) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
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
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()
    except OSError:
        pass
    finally:
        client.close()
        upstream.close()


def _serve(listener: socket.socket, path: str, port: int) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_tunnel, args=(client, path, port), daemon=True).start()


def _listen(port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener


def main(args: list[str]) -> int:
    path, proxy_port, ports = args[0], int(args[1]), [int(p) for p in args[2].split(",") if p]
    argv = args[4:]
    for port, forwarded in [(proxy_port, 0)] + [(p, p) for p in ports]:
        listener = _listen(port)
        threading.Thread(target=_serve, args=(listener, path, forwarded), daemon=True).start()
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)  # noqa: S606 - the confined command, by design
        except OSError as exc:
            os.write(2, f"{argv[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: os.kill(child, number))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
