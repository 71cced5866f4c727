"""The decision rule for one customer, one tick: decide (and why), raise a drift alert, or skip.

Pure apart from `drift_of`, which the sensor backs with the feature files; the order of the
checks is the policy: busy, first training (history), schedule, volume, then drift.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from retrain_assets.policy.alerts import DriftAlert
from retrain_assets.policy.decisions import Decision, Policy
from retrain_assets.policy.drift import DriftMeasure
from retrain_assets.policy.history import Published, days_after, history_days, new_rows
from retrain_assets.policy.thresholds import PolicySettings

APPROVAL_JOB = "approve_drift_retraining"
DriftOf = Callable[[Decision, list[dt.date]], DriftMeasure]
# What an outcome is, in a word or three: the tick's log counts customers by it.
Kind = Literal[
    "first training",
    "schedule",
    "volume",
    "drift alert",
    "busy",
    "not enough history",
    "waiting for drift approval",
    "nothing due",
]


@dataclass(frozen=True)
class Outcome:
    """What the policy does for a customer this tick, and the reason shown in the UI."""

    action: Literal["decide", "alert", "skip"]
    kind: Kind
    reason: str
    policy: Policy | None = None
    drift: DriftMeasure | None = None
    details: dict[str, Any] = field(default_factory=dict)


def policy_outcome(
    customer: str,
    settings: PolicySettings,
    published: Published,
    last: Decision | None,
    alert: DriftAlert | None,
    busy: str | None,
    now: dt.datetime,
    drift_of: DriftOf,
) -> Outcome:
    """Return the policy's outcome for one customer."""
    if busy:
        return Outcome("skip", "busy", f"busy ({busy}): no new decision until it finishes")
    # The settings go into a decision's details only; asdict per customer and tick was a
    # fifth of a steady tick's time at 2,000 customers (BENCHMARKS.md, retraining_policy).
    if last is None:
        return _first_training(customer, settings, published)
    rows, days = new_rows(published, customer, last.last_day)
    age = now - last.decided_at
    facts: dict[str, Any] = {
        "new_rows": rows,
        "new_days": days,
        "last_decision": last.id,
        "age_days": age.days,
    }
    if age >= dt.timedelta(days=settings.schedule_days) and days > 0:
        reason = (
            f"schedule: last decision {last.id} is {age.days} days old (every "
            f"{settings.schedule_days} days); {days} new day(s) after {last.last_day}"
        )
        return Outcome(
            "decide",
            "schedule",
            reason,
            "schedule",
            details={"settings": dataclasses.asdict(settings), **facts},
        )
    if rows >= settings.min_new_rows:
        reason = (
            f"volume: {rows} new rows over {days} day(s) after {last.last_day} "
            f"(threshold {settings.min_new_rows})"
        )
        return Outcome(
            "decide",
            "volume",
            reason,
            "volume",
            details={"settings": dataclasses.asdict(settings), **facts},
        )
    status = (
        f"last decision {last.id} is {age.days} day(s) old ({_schedule(last, settings, days)}), "
        f"{rows} of {settings.min_new_rows} new rows"
    )
    if alert is not None:
        return Outcome(
            "skip",
            "waiting for drift approval",
            f"{alert.describe()}; alert {alert.id} waiting for approval since "
            f"{alert.detected_at:%Y-%m-%d %H:%M} (launch {APPROVAL_JOB} for {customer}); {status}",
        )
    return _drift_outcome(customer, settings, published, last, status, drift_of)


def _first_training(customer: str, settings: PolicySettings, published: Published) -> Outcome:
    """A customer never decided for: its first training once it has enough history."""
    have = history_days(published, customer)
    if have < settings.min_history_days:
        return Outcome(
            "skip",
            "not enough history",
            f"not enough history yet: {have} of {settings.min_history_days} days published "
            "with rows for this customer",
        )
    reason = f"first training: no decision recorded yet, {have} days of history published"
    return Outcome(
        "decide",
        "first training",
        reason,
        "schedule",
        details={"settings": dataclasses.asdict(settings), "history_days": have},
    )


def _schedule(last: Decision, settings: PolicySettings, new_days: int) -> str:
    """Say when the schedule decides: its due time, and the new day it needs."""
    due = (last.decided_at + dt.timedelta(days=settings.schedule_days)).astimezone(dt.UTC)
    needs = "" if new_days else f", with a day after {last.last_day} published"
    return f"schedule {settings.schedule_days}: due {due:%Y-%m-%d %H:%M} UTC{needs}"


def _drift_outcome(
    customer: str,
    settings: PolicySettings,
    published: Published,
    last: Decision,
    status: str,
    drift_of: DriftOf,
) -> Outcome:
    """Nothing else is due: measure drift once enough new days are published."""
    recent = days_after(published, last.last_day, settings.drift_recent_days)
    if len(recent) < settings.drift_recent_days:
        return Outcome(
            "skip",
            "nothing due",
            f"nothing due: {status}; drift needs {settings.drift_recent_days} new day(s), "
            f"{len(recent)} published",
        )
    drift = drift_of(last, recent)
    if drift.value >= settings.drift_threshold:
        reason = (
            f"drift {drift.value:.2f} >= {settings.drift_threshold:g} ({drift.feature}, "
            f"{drift.recent_first} .. {drift.recent_last}): a person must approve with "
            f"{APPROVAL_JOB} for {customer}; {status}"
        )
        return Outcome(
            "alert",
            "drift alert",
            reason,
            drift=drift,
            details={"decision_id": last.id, "threshold": settings.drift_threshold},
        )
    return Outcome(
        "skip",
        "nothing due",
        f"nothing due: {status}, drift {drift.value:.2f} < {settings.drift_threshold:g}",
    )
