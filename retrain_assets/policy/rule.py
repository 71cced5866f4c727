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


@dataclass(frozen=True)
class Outcome:
    """What the policy does for a customer this tick, and the reason shown in the UI."""

    action: Literal["decide", "alert", "skip"]
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
        return Outcome("skip", f"busy ({busy}): no new decision until it finishes")
    # The settings go into a decision's details only; asdict per customer and tick was a
    # fifth of a steady tick's time at 2,000 customers (BENCHMARKS.md, retraining_policy).
    if last is None:
        have = history_days(published, customer)
        if have < settings.min_history_days:
            return Outcome(
                "skip",
                f"not enough history yet: {have} of {settings.min_history_days} days published "
                "with rows for this customer",
            )
        reason = f"first training: no decision recorded yet, {have} days of history published"
        return Outcome(
            "decide",
            reason,
            "schedule",
            details={"settings": dataclasses.asdict(settings), "history_days": have},
        )
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
            reason,
            "volume",
            details={"settings": dataclasses.asdict(settings), **facts},
        )
    status = (
        f"last decision {last.id} is {age.days} day(s) old (schedule {settings.schedule_days}), "
        f"{rows} of {settings.min_new_rows} new rows"
    )
    if alert is not None:
        return Outcome(
            "skip",
            f"{alert.describe()}; waiting for approval since {alert.detected_at:%Y-%m-%d %H:%M} "
            f"(launch {APPROVAL_JOB} for {customer}); {status}",
        )
    recent = days_after(published, last.last_day, settings.drift_recent_days)
    if len(recent) < settings.drift_recent_days:
        return Outcome(
            "skip",
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
            reason,
            drift=drift,
            details={"decision_id": last.id, "threshold": settings.drift_threshold},
        )
    return Outcome(
        "skip",
        f"nothing due: {status}, drift {drift.value:.2f} < {settings.drift_threshold:g}",
    )
