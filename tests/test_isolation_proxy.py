"""The filtering proxy on its Unix socket: refusals, bad clients, and it keeps serving."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import anyio
from isolationkit import listener

from atlante_eval._util.endpoints import Endpoint
from atlante_eval.isolation.proxy import FilterProxy, serve_proxy


def _exchange(path: Path, data: bytes, close_early: bool) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(path))
        conn.sendall(data)
        if close_early:
            return b""
        chunks = []
        while True:
            chunk = conn.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks):
                if data.startswith(b"CONNECT") and b" 200 " in chunks[0]:
                    conn.sendall(b"through\n")
                    # The server closes after reading: EOF here means it got the bytes.
                    while conn.recv(4096):
                        pass
                break
        return b"".join(chunks)


def test_proxy_refuses_records_and_survives_bad_clients() -> None:
    """Garbage, a hang-up mid-request and a refused target leave the proxy serving."""
    with listener() as server, tempfile.TemporaryDirectory(prefix="atl-proxy-", dir="/tmp") as d:
        path = Path(d) / "p.sock"
        proxy = FilterProxy([Endpoint("127.0.0.1", server.port)])

        async def main() -> list[bytes]:
            async with serve_proxy(proxy, path):
                replies = []
                for data, early in [
                    (b"\x00\xffnot http\r\n\r\n", False),
                    (b"CONNECT 127.0.0.1:1", True),
                    (b"CONNECT evil.test:443 HTTP/1.1\r\n\r\n", False),
                    (b"CONNECT evil.test:443 HTTP/1.1\r\n\r\n", False),
                    (b"GET /relative HTTP/1.1\r\n\r\n", False),
                    (f"CONNECT 127.0.0.1:{server.port} HTTP/1.1\r\n\r\n".encode(), False),
                ]:
                    replies.append(await anyio.to_thread.run_sync(_exchange, path, data, early))
                return replies

        replies = anyio.run(main)
        received = list(server.received)
    assert replies[0].startswith(b"HTTP/1.1 400")
    assert replies[2].startswith(b"HTTP/1.1 403")
    assert replies[3].startswith(b"HTTP/1.1 403")
    assert replies[4].startswith(b"HTTP/1.1 400")
    assert replies[5].startswith(b"HTTP/1.1 200")
    assert proxy.denied == {"evil.test:443": 2}
    assert received == [b"through\n"]
