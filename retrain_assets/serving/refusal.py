"""The one exception every bad request becomes: a 4xx status and what is wrong, and where."""

from __future__ import annotations


class InvalidRequest(Exception):
    """A request the service refuses: `status` (4xx) and a message saying what and where."""

    def __init__(self, status: int, message: str) -> None:
        """Keep the HTTP status with the message."""
        super().__init__(message)
        self.status = status
        self.message = message
