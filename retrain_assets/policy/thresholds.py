"""Per-customer retraining thresholds: defaults in code, overrides in `retraining_settings`.

A NULL column means "use the default", so changing a default reaches every customer that did
not override that one value. Values are range-checked on the way in, never at decision time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrain_assets.features.evidence import HOLDOUT_DAYS  # a window must be longer than it
from retrain_assets.store.database import transaction


class InvalidSetting(ValueError):
    """A settings value out of range, or settings for a customer nobody knows."""


@dataclass(frozen=True)
class PolicySettings:
    """One customer's effective thresholds.

    Attributes:
        schedule_days: retrain when the last decision is at least this many days old.
        min_new_rows: retrain when this many new store_day_features rows (one per store, item
            and day) were published after the last decision's window.
        drift_threshold: ask a person to approve retraining when the standardized mean shift
            of a drift feature reaches this.
        min_history_days: a customer without any decision needs this many published days
            with rows before its first training.
        drift_recent_days: how many new days (after the training window) drift compares.
        window_days: how many published days a decision chooses for training (at most).
    """

    schedule_days: int = 7
    min_new_rows: int = 1000
    drift_threshold: float = 0.5
    min_history_days: int = 56
    drift_recent_days: int = 7
    window_days: int = 90


DEFAULTS = PolicySettings()
FIELDS = tuple(f.name for f in dataclasses.fields(PolicySettings))
_RANGES: dict[str, tuple[float, float]] = {
    "schedule_days": (1, 365),
    "min_new_rows": (1, 100_000_000),
    "drift_threshold": (0.01, 100.0),
    "min_history_days": (HOLDOUT_DAYS + 1, 730),
    "drift_recent_days": (1, 90),
    "window_days": (HOLDOUT_DAYS + 1, 730),
}


def validate(settings: PolicySettings, where: str) -> PolicySettings:
    """Return `settings` if every value is in range and consistent, else raise saying which.

    Raises:
        InvalidSetting: a value is outside its range, or min_history_days > window_days.
    """
    for name in FIELDS:
        value = getattr(settings, name)
        low, high = _RANGES[name]
        if not low <= value <= high:
            raise InvalidSetting(f"{where}: {name} = {value} is outside [{low:g}, {high:g}]")
    if settings.min_history_days > settings.window_days:
        raise InvalidSetting(
            f"{where}: min_history_days = {settings.min_history_days} exceeds window_days = "
            f"{settings.window_days}; a first training could never find its history"
        )
    return settings


def all_settings(url: str) -> dict[str, PolicySettings]:
    """Return the effective settings of every customer with an override row."""
    with transaction(url) as cur:
        cur.execute(f"SELECT customer, {', '.join(FIELDS)} FROM retraining_settings")
        rows = cur.fetchall()
    return {
        row[0]: dataclasses.replace(
            DEFAULTS, **{n: v for n, v in zip(FIELDS, row[1:], strict=True) if v is not None}
        )
        for row in rows
    }


def settings_for(url: str, customer: str) -> PolicySettings:
    """Return one customer's effective settings (the defaults without an override row)."""
    return all_settings(url).get(customer, DEFAULTS)


def set_settings(
    url: str, customer: str, changes: Mapping[str, float], updated_by: str
) -> PolicySettings:
    """Override some of a customer's settings and return its new effective settings.

    Raises:
        InvalidSetting: an unknown customer or field, or a resulting value out of range.
    """
    unknown = sorted(set(changes) - set(FIELDS))
    if unknown:
        raise InvalidSetting(f"retraining_settings: unknown setting(s) {unknown}; known: {FIELDS}")
    with transaction(url) as cur:
        cur.execute("SELECT 1 FROM customers WHERE name = %s", (customer,))
        if cur.fetchone() is None:
            raise InvalidSetting(
                f"retraining_settings: unknown customer {customer!r} (not in the customers table;"
                " add it with `retrain-assets customers add` or land its files)"
            )
        current = all_settings(url).get(customer, DEFAULTS)
        # each value has its field's type (_typed), which a checker cannot see per name
        typed: dict[str, Any] = {n: _typed(n, v) for n, v in changes.items()}
        validate(dataclasses.replace(current, **typed), f"settings of {customer}")
        columns = list(typed)
        cur.execute(
            f"""
            INSERT INTO retraining_settings (customer, updated_by, {", ".join(columns)})
            VALUES (%s, %s, {", ".join(["%s"] * len(columns))})
            ON CONFLICT (customer) DO UPDATE SET updated_by = EXCLUDED.updated_by,
                updated_at = clock_timestamp(),
                {", ".join(f"{c} = EXCLUDED.{c}" for c in columns)}
            """,
            (customer, updated_by, *typed.values()),
        )
    return settings_for(url, customer)


def _typed(name: str, value: float) -> float:
    """Return `value` as the field's type; a fraction for a whole-number field is refused."""
    if isinstance(getattr(DEFAULTS, name), int):
        if float(value) != int(value):
            raise InvalidSetting(f"retraining_settings: {name} must be a whole number, not {value}")
        return int(value)
    return float(value)
