"""The decision rule for one customer, one tick: decide (and why), raise a drift alert, or skip.

Pure apart from `drift_of`, which the sensor backs with the feature files; the order of the
checks is the policy: busy, first training (history), the customer's rows in the window it
would train on (`_data_stopped`), schedule, volume, then drift. Drift raises an alert for a
person to approve, or with RETRAIN_DRIFT_APPROVAL=auto decides at once (issue 37: alerts left
waiting kept regime changes from the served model).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from retrain_assets.features.evidence import EvidenceRules, judged_holdout_days
from retrain_assets.policy.alerts import DriftAlert
from retrain_assets.policy.decisions import Decision, Policy
from retrain_assets.policy.drift import DriftMeasure
from retrain_assets.policy.history import (
    Published,
    choose_window,
    days_after,
    history_days,
    new_rows,
)
from retrain_assets.policy.thresholds import PolicySettings
from retrain_assets.settings_model import current_settings, env_name
from retrain_assets.store.snapshot_ref import SnapshotRef

APPROVAL_JOB = "approve_drift_retraining"
DRIFT_APPROVAL = env_name("drift_approval")
DriftApproval = Literal["person", "auto"]
DriftOf = Callable[[Decision, list[dt.date]], DriftMeasure]
# What an outcome is, in a word or three: the tick's log counts customers by it.
Kind = Literal[
    "first training",
    "schedule",
    "volume",
    "drift",
    "drift alert",
    "busy",
    "not enough history",
    "waiting for drift approval",
    "nothing due",
    "no data",
]
NO_DATA: Kind = "no data"


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
    *,
    window: WindowDays | None = None,
    rules: EvidenceRules | None = None,
    approval: DriftApproval | None = None,
) -> Outcome:
    """Return the policy's outcome for one customer.

    `window`: the days of the snapshot a decision would name now (`window_days_of` over
    `choose_window` for the customer's window_days; the caller may pass the one it built for
    every customer with those days);
    `rules`: the evidence minimums (default: `EvidenceRules.from_settings()`);
    `approval`: who approves retraining on drift (default: `drift_approval()`, read only when
    drift or a pending alert is reached).
    """
    if busy:
        return Outcome("skip", "busy", f"busy ({busy}): no new decision until it finishes")
    # The settings go into a decision's details only; asdict per customer and tick was a
    # fifth of a steady tick's time at 2,000 customers (BENCHMARKS.md, retraining_policy).
    if last is None and history_days(published, customer) < settings.min_history_days:
        return _first_training(customer, settings, published)
    if window is None:
        window = window_days_of(published, choose_window(published, settings.window_days))
    stopped = _data_stopped(customer, published, window, rules or EvidenceRules.from_settings())
    if stopped is not None:
        return stopped
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
    if alert is not None and (approval or drift_approval()) == "person":
        return Outcome(
            "skip",
            "waiting for drift approval",
            f"{alert.describe()}; alert {alert.id} waiting for approval since "
            f"{alert.detected_at:%Y-%m-%d %H:%M} (launch {APPROVAL_JOB} for {customer}); {status}",
        )
    return _drift_outcome(customer, settings, published, last, status, drift_of, approval)


def drift_approval() -> DriftApproval:
    """Return RETRAIN_DRIFT_APPROVAL: `person` (an alert waits for the approval job) or `auto`.

    Raises:
        SettingsError: the variable names neither (or another setting is bad).
    """
    return current_settings().drift_approval


@dataclass(frozen=True)
class WindowDays:
    """The window a decision would name now, its days' rows per customer ready to add up.

    Built once per tick and `window_days` (`window_days_of`): a customer's check is then a few
    dictionary reads, newest day first, stopping once the minimum is reached.
    """

    window: SnapshotRef
    holdout_start: dt.date
    holdout: tuple[Mapping[str, int], ...]  # newest day first
    train: tuple[Mapping[str, int], ...]  # newest day first


def window_days_of(
    published: Published, window: SnapshotRef, holdout_days: int | None = None
) -> WindowDays:
    """Return the window's holdout and training days as rows per customer, newest first.

    `holdout_days`: default `judged_holdout_days()`, the holdout `training_job` judges and
    exports (RETRAIN_GATE_WINDOWS x RETRAIN_GATE_WINDOW_DAYS when longer than 7 days), so the
    policy never decides on a window `training_job` then refuses for its holdout.
    """
    days_held = judged_holdout_days() if holdout_days is None else holdout_days
    start = max(window.last_day - dt.timedelta(days=days_held - 1), window.first_day)
    days = sorted((d for d in published if window.first_day <= d <= window.last_day), reverse=True)
    return WindowDays(
        window,
        start,
        tuple(published[d].rows_per_customer for d in days if d >= start),
        tuple(published[d].rows_per_customer for d in days if d < start),
    )


def _rows_up_to(days: tuple[Mapping[str, int], ...], customer: str, minimum: int) -> int:
    """Add up the customer's rows day by day, stopping once `minimum` is reached."""
    total = 0
    for rows in days:
        total += rows.get(customer, 0)
        if total >= minimum:
            break
    return total


def _data_stopped(
    customer: str, published: Published, days: WindowDays, rules: EvidenceRules
) -> Outcome | None:
    """Return the deferral of a customer whose rows the window lacks, None when it has them.

    The window a decision would name ends on the latest published day (any customer's); a
    customer whose files stopped has no rows in its holdout, and a GPU job spent on it could
    never be judged. Counted on the published rows per customer and day (per store is
    `training_job`'s part, which reads the rows), with the minimums of `features/evidence.py`.
    """
    holdout = _rows_up_to(days.holdout, customer, rules.min_holdout_rows)
    train = 0
    if rules.enough_holdout(holdout):
        train = _rows_up_to(days.train, customer, rules.min_train_rows)
        if rules.enough_train(train):
            return None
    holdout = _rows_up_to(days.holdout, customer, 1 << 62)  # the whole count, for the reason
    first, last = days.window.first_day, days.window.last_day
    with_rows = [day for day, r in published.items() if r.rows_per_customer.get(customer, 0)]
    newest = max(with_rows) if with_rows else None
    if newest is None:
        reason = f"deferred: no rows of {customer} are published (published up to {last})"
    elif newest < days.holdout_start:
        reason = (
            f"deferred: no data from {customer} since {newest} (its newest day with rows; "
            f"published up to {last}): the window {first} .. {last} would hold {holdout} "
            f"holdout rows of it (needs >= {rules.min_holdout_rows}); no training is decided "
            "until its rows arrive"
        )
    else:
        held = (last - days.holdout_start).days + 1
        reason = (
            f"deferred: the window {first} .. {last} holds {holdout} holdout rows of {customer} "
            f"in its {held}-day holdout {days.holdout_start} .. {last} "
            f"(needs >= {rules.min_holdout_rows}) and {train}+ training rows (needs >= "
            f"{rules.min_train_rows}); its newest day with rows is {newest}"
        )
    details: dict[str, Any] = {
        "no_data_since": newest.isoformat() if newest else None,
        "published_up_to": last.isoformat(),
    }
    return Outcome("skip", NO_DATA, reason, details=details)


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
    approval: DriftApproval | None,
) -> Outcome:
    """Nothing else is due: measure drift once enough new days are published.

    Over the threshold: an alert a person approves, or a `drift` decision when approval is
    `auto` (a pending alert of the person's time is resolved by that decision).
    """
    recent = days_after(published, last.last_day, settings.drift_recent_days)
    if len(recent) < settings.drift_recent_days:
        return Outcome(
            "skip",
            "nothing due",
            f"nothing due: {status}; drift needs {settings.drift_recent_days} new day(s), "
            f"{len(recent)} published",
        )
    drift = drift_of(last, recent)
    if drift.value >= settings.drift_threshold and (approval or drift_approval()) == "auto":
        reason = (
            f"drift {drift.value:.2f} >= {settings.drift_threshold:g} ({drift.feature}, "
            f"{drift.recent_first} .. {drift.recent_last}), approved automatically "
            f"({DRIFT_APPROVAL}=auto); {status}"
        )
        return Outcome(
            "decide",
            "drift",
            reason,
            "drift",
            drift=drift,
            details={
                "settings": dataclasses.asdict(settings),
                "drift": drift.value,
                "drift_feature": drift.feature,
                "threshold": settings.drift_threshold,
                "approved_by": f"{DRIFT_APPROVAL}=auto",
                "last_decision": last.id,
            },
        )
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
