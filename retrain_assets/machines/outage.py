"""An unreachable training service, as the training machine records it.

A GPU job runs for hours; the service that runs it may be away for a while meanwhile. That is
not a failed job and must not spend POLL_JOB's visit budget one tick at a time, but it must be
visible on the customer: the first poll that cannot reach the service writes a history row and
the pointer's `last_error` ("training service unreachable since T"), later ticks of the same
outage leave the run alone (the sensor does not visit it), the first poll that reaches the
service again writes a row saying so and clears the error. What bounds a very long outage is
time, not visits: past RETRAIN_GPU_OUTAGE_LIMIT_SECONDS (default one day) the next visit ends
the run FAILED with the outage's start (see docs/decisions.md).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

UNREACHABLE_SINCE = "unreachable_since"  # payload: ISO time of the outage's first failed poll
SERVICE_DOWN = "__training_service_down__"  # prefetched: the sensor's status batch failed
OUTAGE_LIMIT = "RETRAIN_GPU_OUTAGE_LIMIT_SECONDS"
_UNREACHABLE_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class ServiceDown:
    """What a caller saw: the service could not be reached at `at`, and the error it got."""

    at: dt.datetime
    error: str


def outage_limit_seconds() -> float:
    """Return how long a run may wait on an unreachable service before it fails (default 1 day).

    Raises:
        ValueError: RETRAIN_GPU_OUTAGE_LIMIT_SECONDS is not a positive number.
    """
    text = os.environ.get(OUTAGE_LIMIT, "86400")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{OUTAGE_LIMIT} must be a number of seconds, not {text!r}") from None
    if value <= 0:
        raise ValueError(f"{OUTAGE_LIMIT} must be positive, not {value}")
    return value


def is_unreachable(error: BaseException) -> bool:
    """Return True for an error that says the service is away (no answer, 502/503/504).

    The HTTP client reports no answer as `GpuServiceError` with status None; other clients
    (the tests' fake) raise `ConnectionError`/`TimeoutError`. A 404 or a 422 is an answer.
    """
    status = getattr(error, "status", "absent")
    if status != "absent" and (status is None or status in _UNREACHABLE_STATUSES):
        return True
    return isinstance(error, ConnectionError | TimeoutError)


def unreachable_since(payload: Mapping[str, Any]) -> dt.datetime | None:
    """Return when the run's current outage began, None when the service answers."""
    since = payload.get(UNREACHABLE_SINCE)
    return dt.datetime.fromisoformat(str(since)) if since else None


def needs_outage_visit(payload: Mapping[str, Any], now: dt.datetime, limit_seconds: float) -> bool:
    """Return True when a tick that cannot reach the service must visit this run.

    Its first failed poll (to record the outage) and a visit past the limit (to end it); any
    other tick of the same outage leaves the run untouched, its budget unspent.
    """
    since = unreachable_since(payload)
    return since is None or (now - since).total_seconds() > limit_seconds


def fmt(at: dt.datetime) -> str:
    """Return a time as the machine's history writes it."""
    return f"{at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"
