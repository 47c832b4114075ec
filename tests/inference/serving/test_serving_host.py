"""The server listens where it is told: 127.0.0.1 by default, not every interface."""

from __future__ import annotations

import socket


def reachable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex((host, port)) == 0


def test_the_default_server_listens_on_loopback_only(served) -> None:
    handle = served.handle
    for port in (handle.grpc_port, handle.http_port, handle.metrics_port):
        assert reachable("127.0.0.1", port)
        assert not reachable("127.0.0.2", port)  # another loopback address: reached only through 0.0.0.0
