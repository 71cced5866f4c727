"""The decision rule against real snapshot records: schedule, volume, history, busy, drift."""

import datetime as dt

import pytest

from retrain_assets.policy.alerts import DriftAlert
from retrain_assets.policy.decisions import Decision
from retrain_assets.policy.drift import DriftMeasure
from retrain_assets.policy.history import choose_window, new_rows
from retrain_assets.policy.rule import policy_outcome
from retrain_assets.store.snapshots import latest_snapshots
from retrain_assets_tests.policy.days import day
from retrain_assets_tests.policy.policy_world import SETTINGS, no_drift, trained_through


def decide(db, last, now, settings=SETTINGS, busy=None, drift_of=no_drift, customer="acme"):
    return policy_outcome(customer, settings, latest_snapshots(db), last, None, busy, now, drift_of)


def test_republished_days_never_count_as_new_data(db, publish):
    publish(0, 39, {"acme": 100, "bolt": 10})
    last = trained_through(db, 39)
    publish(40, 43, {"acme": 100})  # four new days: 400 rows
    publish(30, 36, {"acme": 150}, backfill="bf-1", version="v2")  # a week republished
    publish(42, 43, {"acme": 100}, backfill="bf-2", version="v3")  # a late fix of new days
    assert new_rows(latest_snapshots(db), "acme", last.last_day) == (400, 4)
    soon = last.decided_at + dt.timedelta(hours=1)
    outcome = decide(db, last, soon)
    assert outcome.action == "skip" and "400 of 500 new rows" in outcome.reason

    publish(44, 44, {"acme": 100})
    outcome = decide(db, last, soon)
    assert (outcome.action, outcome.policy) == ("decide", "volume")
    assert outcome.reason.startswith("volume: 500 new rows over 5 day(s) after 2026-02-09")


def test_the_schedule_is_due_after_n_days_only_with_something_new(db, publish):
    publish(0, 29, {"acme": 10})
    last = trained_through(db, 29)
    late = last.decided_at + dt.timedelta(days=SETTINGS.schedule_days, minutes=1)
    nothing_new = decide(db, last, late)
    assert nothing_new.action == "skip" and "0 of 500 new rows" in nothing_new.reason
    publish(30, 30, {"acme": 10})
    assert decide(db, last, last.decided_at + dt.timedelta(days=6)).action == "skip"
    due = decide(db, last, late)
    assert (due.action, due.policy) == ("decide", "schedule")
    assert "is 7 days old (every 7 days); 1 new day(s)" in due.reason


def test_a_new_customer_waits_for_history_with_the_reason_then_gets_a_first_training(db, publish):
    publish(0, 9, {"acme": 10, "bolt": 0})
    now = dt.datetime.now(dt.UTC)
    outcome = decide(db, None, now)
    assert outcome.action == "skip"
    assert outcome.reason == (
        "not enough history yet: 10 of 20 days published with rows for this customer"
    )
    assert decide(db, None, now, customer="bolt").reason.startswith(
        "not enough history yet: 0 of 20"
    )
    publish(10, 19, {"acme": 10})
    first = decide(db, None, now)
    assert (first.action, first.policy) == ("decide", "schedule")
    assert first.reason.startswith("first training: no decision recorded yet, 20 days")


def test_a_busy_customer_gets_no_decision(db, publish):
    publish(0, 29, {"acme": 1000})
    outcome = decide(db, None, dt.datetime.now(dt.UTC), busy="training machine in POLL_JOB")
    assert outcome.action == "skip" and "busy (training machine in POLL_JOB)" in outcome.reason


def test_drift_over_the_threshold_asks_for_approval_and_never_decides(db, publish, monkeypatch):
    monkeypatch.setenv("RETRAIN_DRIFT_APPROVAL", "person")
    publish(0, 29, {"acme": 10})
    last = trained_through(db, 29)
    soon = last.decided_at + dt.timedelta(hours=1)
    publish(30, 31, {"acme": 10})

    def drifted(decision: Decision, recent: list[dt.date]) -> DriftMeasure:
        assert decision.id == last.id and recent == [day(29 + 1), day(31), day(32)][: len(recent)]
        return DriftMeasure(2.5, "rolling_mean_7", recent[0], recent[-1])

    too_few = decide(db, last, soon, drift_of=drifted)
    assert too_few.action == "skip" and "drift needs 3 new day(s), 2 published" in too_few.reason
    publish(32, 32, {"acme": 10})
    alert = decide(db, last, soon, drift_of=drifted)
    assert alert.action == "alert" and alert.policy is None
    assert alert.reason.startswith("drift 2.50 >= 0.5 (rolling_mean_7, 2026-01-31 .. 2026-02-02)")
    assert alert.details == {"decision_id": last.id, "threshold": 0.5}
    calm = decide(db, last, soon)
    assert calm.action == "skip" and "drift 0.10 < 0.5" in calm.reason


def test_drift_approved_automatically_is_a_drift_decision_and_a_pending_alert_waits_no_more(
    db, publish, monkeypatch
):
    monkeypatch.setenv("RETRAIN_DRIFT_APPROVAL", "auto")
    publish(0, 29, {"acme": 10})
    last = trained_through(db, 29)
    publish(30, 32, {"acme": 10})
    soon = last.decided_at + dt.timedelta(hours=1)

    def drifted(decision: Decision, recent: list[dt.date]) -> DriftMeasure:
        return DriftMeasure(2.5, "rolling_mean_7", recent[0], recent[-1])

    decided = decide(db, last, soon, drift_of=drifted)
    assert (decided.action, decided.kind, decided.policy) == ("decide", "drift", "drift")
    assert decided.reason.startswith(
        "drift 2.50 >= 0.5 (rolling_mean_7, 2026-01-31 .. 2026-02-02), approved automatically "
        "(RETRAIN_DRIFT_APPROVAL=auto)"
    )
    assert decided.details["approved_by"] == "RETRAIN_DRIFT_APPROVAL=auto"
    alert = DriftAlert(7, "acme", last.id, "price", 1.2, 0.5, day(30), day(32), soon)
    args = (SETTINGS, latest_snapshots(db), last, alert, None, soon, drifted)
    assert policy_outcome("acme", *args).policy == "drift"  # not "waiting for drift approval"
    waiting = policy_outcome("acme", *args, approval="person")
    assert (waiting.action, waiting.kind) == ("skip", "waiting for drift approval")
    assert decide(db, last, soon).kind == "nothing due"  # below the threshold: nothing


@pytest.mark.parametrize(
    ("published", "window", "expected"),
    [
        ((0, 99), 90, (10, 99)),
        ((0, 39), 90, (0, 39)),
    ],
)
def test_the_window_is_the_unbroken_run_of_days_ending_at_the_latest(
    db, publish, published, window, expected
):
    publish(*published, {"acme": 1})
    ref = choose_window(latest_snapshots(db), window)
    assert (ref.first_day, ref.last_day) == (day(expected[0]), day(expected[1]))
    assert len(ref.data_versions) == expected[1] - expected[0] + 1


def test_a_gap_in_what_is_published_ends_the_window(db, publish):
    publish(0, 9, {"acme": 1})
    publish(12, 30, {"acme": 1})
    ref = choose_window(latest_snapshots(db), 90)
    assert (ref.first_day, ref.last_day) == (day(12), day(30))


def test_days_of_the_past_published_for_the_first_time_are_history(db, publish):
    """Older than the last window's end: never new data, however late they first appear."""
    publish(10, 39, {"acme": 100})
    last = trained_through(db, 39)
    assert last.first_day == day(10)
    publish(0, 9, {"acme": 500}, backfill="bf-history")  # earlier history, first published now
    publish(20, 20, {"acme": 500}, backfill="bf-fix", version="v2")  # and a republished day
    assert new_rows(latest_snapshots(db), "acme", last.last_day) == (0, 0)
    outcome = decide(db, last, last.decided_at + dt.timedelta(hours=1))
    assert outcome.action == "skip" and "0 of 500 new rows" in outcome.reason
