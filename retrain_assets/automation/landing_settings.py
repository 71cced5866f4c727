"""Settings of the landing automation, read from the settings model when they are needed.

Production defaults: a tick a minute, a file counts once it has not changed for 30 s, and a
day waits for every active customer until 12 hours after it ended (UTC). Tests shorten them.
Their bounds live with the fields (settings_model/model.py); a bad value raises `SettingsError`.
"""

from __future__ import annotations

from retrain_assets.settings_model import current_settings


def landing_interval_seconds() -> int:
    """Return how often `landing_arrivals` looks at the landing zone (default 60 s)."""
    return current_settings().landing_interval_seconds


def landing_settle_seconds() -> int:
    """Return how long a day's newest file must be unchanged before it is read (default 30 s).

    A file still being copied into the landing zone would otherwise be read half-written.
    """
    return current_settings().landing_settle_seconds


def day_cutoff_hours() -> int:
    """Return how long after a day ends (UTC) it waits for missing customers (default 12 h).

    Past the cut-off the day is read with the files that arrived; a file arriving later is a
    late file and re-materializes its day.
    """
    return current_settings().day_cutoff_hours


def landing_automation_enabled() -> bool:
    """Return whether `landing_arrivals` requests runs (RETRAIN_LANDING_AUTOMATION, default on).

    `off` is for an installation (or a test) that publishes its days by hand; the sensor then
    skips every tick saying so.
    """
    return current_settings().landing_automation
