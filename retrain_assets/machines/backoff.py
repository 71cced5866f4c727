"""Waits between retries: a state that retries is visited again later, never in the same advance.

A download that fails, a submission after a failed job, a candidate run requested again: each
retry used to follow the failure inside one advance, so a budget of 5 was spent in a tenth of a
second and an artifact store that hiccuped for longer cost a human. Now the engine records when
the next try is due (`RETRY_AT` in the run's payload, named in the history row) and yields; a
later advance (the sensor's next tick) runs it once it is due. The wait doubles per retry up to
a ceiling, with jitter so runs that failed together do not retry together.

The waits are settings: RETRAIN_RETRY_FIRST_SECONDS, RETRAIN_RETRY_MAX_SECONDS and
RETRAIN_RETRY_JITTER (`Backoff.from_settings`).
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from retrain_assets.settings_model import current_settings

RETRY_AT = "retry_at"  # payload: {"state": <state>, "at": <ISO time>}: its next visit is not before


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: retry n waits first * 2**(n-1), capped, +/- jitter."""

    first_seconds: float = 30.0
    max_seconds: float = 600.0
    jitter: float = 0.25  # a fraction of the wait, drawn uniformly either side

    def __post_init__(self) -> None:
        """Refuse waits that make no sense, naming the field."""
        if self.first_seconds < 0:
            raise ValueError(f"first_seconds must be >= 0, not {self.first_seconds}")
        if self.max_seconds < self.first_seconds:
            raise ValueError(
                f"max_seconds ({self.max_seconds}) must be >= first_seconds ({self.first_seconds})"
            )
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError(f"jitter must be in [0, 1), not {self.jitter}")

    def delay(self, retry: int, draw: Callable[[], float] = random.random) -> float:
        """Return the seconds to wait before retry number `retry` (1 = the first retry)."""
        if retry < 1:
            raise ValueError(f"retry must be >= 1, not {retry}")
        base = min(self.first_seconds * 2.0 ** min(retry - 1, 30), self.max_seconds)
        return base * (1.0 - self.jitter + 2.0 * self.jitter * draw())

    @classmethod
    def from_settings(cls) -> Backoff:
        """Return the backoff the settings hold (defaults 30 s, 600 s, 0.25).

        An unset ceiling is 600 s, or the first wait when that is longer.

        Raises:
            SettingsError: a variable is not a number in its range (the message names it).
        """
        settings = current_settings()
        first = settings.retry_first_seconds
        ceiling = settings.retry_max_seconds
        return cls(first, max(600.0, first) if ceiling is None else ceiling, settings.retry_jitter)


def retry_marker(state: str, at: dt.datetime) -> dict[str, str]:
    """Return the payload value saying `state`'s next visit is due at `at`."""
    return {"state": state, "at": at.isoformat()}


def retry_due(payload: Mapping[str, Any], state: str) -> dt.datetime | None:
    """Return when the next visit of `state` is due, None when no wait is pending for it."""
    marker = payload.get(RETRY_AT)
    if not isinstance(marker, Mapping) or marker.get("state") != state:
        return None
    return dt.datetime.fromisoformat(str(marker["at"]))


def retry_pending(payload: Mapping[str, Any], state: str, now: dt.datetime) -> bool:
    """Return True when `state`'s next visit is not due yet at `now`."""
    due = retry_due(payload, state)
    return due is not None and now < due


def describe_due(
    state: str, at: dt.datetime, now: dt.datetime, visit: int, budget: int | None
) -> str:
    """Return the history's words for a scheduled retry, e.g. 'next try of X (visit 2 of 5) ...'."""
    of = f" of {budget}" if budget is not None else ""
    wait = max((at - now).total_seconds(), 0.0)
    when = f"{at:%Y-%m-%d %H:%M:%S} UTC"
    return f"next try of {state} (visit {visit}{of}) due at {when} (in {wait:.0f} s)"
