"""Settings of the landing automation, read from the environment when they are needed.

Production defaults: a tick a minute, a file counts once it has not changed for 30 s, and a
day waits for every active customer until 12 hours after it ended (UTC). Tests shorten them.
"""

from __future__ import annotations

import os

ON, OFF = {"on", "1", "true", "yes"}, {"off", "0", "false", "no"}


def _whole_number(name: str, default: str, minimum: int) -> int:
    text = os.environ.get(name, default).strip()
    if not text.isdigit() or int(text) < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, not {text!r}")
    return int(text)


def landing_interval_seconds() -> int:
    """Return how often `landing_arrivals` looks at the landing zone (default 60 s).

    Raises:
        ValueError: RETRAIN_LANDING_INTERVAL_SECONDS is not a positive whole number.
    """
    return _whole_number("RETRAIN_LANDING_INTERVAL_SECONDS", "60", 1)


def landing_settle_seconds() -> int:
    """Return how long a day's newest file must be unchanged before it is read (default 30 s).

    A file still being copied into the landing zone would otherwise be read half-written.

    Raises:
        ValueError: RETRAIN_LANDING_SETTLE_SECONDS is not a whole number.
    """
    return _whole_number("RETRAIN_LANDING_SETTLE_SECONDS", "30", 0)


def day_cutoff_hours() -> int:
    """Return how long after a day ends (UTC) it waits for missing customers (default 12 h).

    Past the cut-off the day is read with the files that arrived; a file arriving later is a
    late file and re-materializes its day.

    Raises:
        ValueError: RETRAIN_DAY_CUTOFF_HOURS is not a whole number.
    """
    return _whole_number("RETRAIN_DAY_CUTOFF_HOURS", "12", 0)


def landing_automation_enabled() -> bool:
    """Return whether `landing_arrivals` requests runs (RETRAIN_LANDING_AUTOMATION, default on).

    `off` is for an installation (or a test) that publishes its days by hand; the sensor then
    skips every tick saying so.

    Raises:
        ValueError: the variable is neither on/true/1/yes nor off/false/0/no.
    """
    text = os.environ.get("RETRAIN_LANDING_AUTOMATION", "on").strip().lower()
    if text not in ON | OFF:
        raise ValueError(f"RETRAIN_LANDING_AUTOMATION must be on or off, not {text!r}")
    return text in ON
