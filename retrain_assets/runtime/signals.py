"""Ctrl-C and SIGTERM as a request to stop, so `up` stops its children before it exits.

The default handlers would end `up` mid-step: children (in their own sessions, out of reach
of the terminal's Ctrl-C) would be orphaned and the embedded Postgres left running.
"""

from __future__ import annotations

import signal
from types import FrameType


class StopRequests:
    """Records SIGINT/SIGTERM; the first asks for an orderly stop, a second one to hurry."""

    def __init__(self) -> None:
        self.received: list[str] = []

    def install(self) -> None:
        """Handle SIGINT and SIGTERM for the rest of the process.

        The handlers stay in place while Postgres shuts down at exit, so a late signal cannot
        cut that short.
        """
        signal.signal(signal.SIGINT, self._record)
        signal.signal(signal.SIGTERM, self._record)

    @property
    def requested(self) -> bool:
        """Return whether a stop was asked for."""
        return bool(self.received)

    @property
    def urgent(self) -> bool:
        """Return whether a stop was asked for twice: skip the grace period."""
        return len(self.received) > 1

    def _record(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signal.Signals(signum).name)
