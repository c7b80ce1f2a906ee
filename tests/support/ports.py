"""A free loopback port for a server a test starts (a program that takes its port as an argument)."""

from __future__ import annotations

import socket


def free_port(kind: socket.SocketKind = socket.SOCK_STREAM) -> int:
    """A port on 127.0.0.1 free at the time of asking (TCP, or UDP with ``socket.SOCK_DGRAM``).

    Prefer binding port 0 in the server itself where it can report what it bound: another process
    may take this port between the asking and the binding."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
