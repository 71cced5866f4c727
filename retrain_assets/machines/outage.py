"""An unreachable training service, as the training machine records it.

A GPU job runs for hours; the service that runs it may be away for a while meanwhile. That is
not a failed job and must not spend POLL_JOB's visit budget one tick at a time, but it must be
visible on the customer: the first poll that cannot reach the service writes a history row and
the pointer's `last_error` ("training service unreachable since T"), later ticks of the same
outage leave the run alone (the sensor does not visit it), the first poll that reaches the
service again writes a row saying so and clears the error. What bounds a very long outage is
time, not visits: past RETRAIN_GPU_OUTAGE_LIMIT_SECONDS (default one day) the next visit ends
the run FAILED with the outage's start (see docs/decisions.md).

Only an absent service is an outage. A status call that gets an answer the platform cannot
use (a 401 for a refused token, a 404, a 500 with a body, an answer that does not parse) or
that breaks in the client is a failed poll like any other: recorded with its text, spending a
POLL_JOB visit. `classify` is the one rule, for the sensor's batch and for a single poll alike.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrain_assets.settings_model import current_settings

UNREACHABLE_SINCE = "unreachable_since"  # payload: ISO time of the outage's first failed poll
STATUS_FAILED = "__status_call_failed__"  # prefetched: the batch's failure, as `classify` saw it
OUTAGE_LIMIT = "RETRAIN_GPU_OUTAGE_LIMIT_SECONDS"
_UNREACHABLE_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class ServiceDown:
    """What a caller saw: the service could not be reached at `at`, and the error it got."""

    at: dt.datetime
    error: str


@dataclass(frozen=True)
class StatusUnread:
    """What a caller saw: the status call failed at `at` for a reason that is not an outage.

    The service (or the client) answered something that is not a status: the poll fails with
    `error` and spends its visit, as any failed transition does.
    """

    at: dt.datetime
    error: str


StatusFailure = ServiceDown | StatusUnread


def classify(error: Exception, at: dt.datetime) -> StatusFailure:
    """Return what a failed status call means: an outage (`ServiceDown`) or a failed poll.

    `error`'s type and message are kept as the text the machine records (`Type: message`).
    """
    text = f"{type(error).__name__}: {error}"
    return ServiceDown(at, text) if is_unreachable(error) else StatusUnread(at, text)


def outage_limit_seconds() -> float:
    """Return how long a run may wait on an unreachable service before it fails (default 1 day).

    Raises:
        SettingsError: RETRAIN_GPU_OUTAGE_LIMIT_SECONDS is not a positive number.
    """
    return current_settings().gpu_outage_limit_seconds


def is_unreachable(error: BaseException) -> bool:
    """Return True for an error that says the service is away (no answer, 502/503/504).

    The HTTP client reports no answer as `GpuServiceError` with status None; other clients
    (the tests' fake) raise `ConnectionError`/`TimeoutError`; the Slurm client sets status None
    when slurmctld cannot be asked. A 401, a 404, a 422, a 500 with a body, an answer that does
    not parse and any other exception are not: the service is there, the call failed.
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
