"""What the project's two HTTP services (GPU training, predictions) share as processes.

uvicorn shuts down gracefully on SIGINT/SIGTERM and then re-raises the signal to the handler it
found installed; with `raise_stop` installed that ends the command normally (exit 0, atexit
runs: the embedded Postgres is stopped if it was the last user) instead of dying of it.
Kept free of Dagster: the GPU service imports it.
"""

from __future__ import annotations

import signal
import socket
import threading
from types import FrameType


class StopSignal(Exception):
    """SIGINT or SIGTERM arrived; uvicorn re-raises it after its graceful shutdown."""


def raise_stop(signum: int, _frame: FrameType | None) -> None:
    """Turn a stop signal into StopSignal, for the `except` around `uvicorn.run`."""
    raise StopSignal(signal.Signals(signum).name)


def install_stop_handlers() -> dict[int, object]:
    """Install `raise_stop` for SIGINT and SIGTERM; return the handlers it replaced.

    Only the main thread may set handlers: elsewhere (a test running the service in a
    thread) nothing is installed and {} is returned.
    """
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}


def restore_handlers(handlers: dict[int, object]) -> None:
    """Put back the handlers `install_stop_handlers` replaced."""
    for sig, handler in handlers.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]


def check_port_free(host: str, port: int) -> None:
    """Refuse, before anything starts, a port another process listens on.

    Raises:
        ValueError: the port cannot be bound, with the system's reason.
    """
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise ValueError(f"cannot listen on {host}:{port}: {error.strerror}") from error
