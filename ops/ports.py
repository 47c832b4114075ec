"""Whether a TCP port can be listened on here (the broker and the Triton server check theirs
before they start, so a taken port is one line, not a hang)."""

from __future__ import annotations

import socket


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Can ``host:port`` be bound now (nothing listens there)?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except (OSError, UnicodeError, OverflowError):  # taken, not an address of this machine, not a port
            return False
    return True
