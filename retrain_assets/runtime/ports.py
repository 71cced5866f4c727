"""Which loopback ports the platform needs, checked before anything starts.

A port taken by another program would otherwise surface as a child crashing seconds later
with a bind error buried in its log; checking first turns that into one clear sentence.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class PortNeed:
    """One port a process of the platform listens on, and the variable that moves it."""

    name: str
    port: int
    setting: str
    host: str = LOOPBACK


def port_problem(host: str, port: int) -> str | None:
    """Return why `host:port` cannot be listened on, or None when it is free.

    Binds the way a server does (SO_REUSEADDR), so a socket in TIME_WAIT left by a server that
    just stopped does not count as taken, while any listener on the port does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            return err.strerror or str(err)
    return None


def busy_port_messages(needs: list[PortNeed]) -> list[str]:
    """Return one message per needed port that cannot be listened on, naming how to move it."""
    messages = []
    for need in needs:
        problem = port_problem(need.host, need.port)
        if problem is not None:
            messages.append(
                f"port {need.port} on {need.host} is in use (needed by {need.name}: {problem}); "
                f"set {need.setting} or stop the other process"
            )
    return messages
