"""A customer whose data stopped (issue 31): visible, deferred with since when, not scheduled."""

import datetime as dt

from retrain_assets.policy.decisions import list_decisions
from retrain_assets.policy.deferrals import (
    clear_deferrals,
    deferral_lines,
    deferrals,
    record_deferral,
)
from retrain_assets.policy.rule import policy_outcome
from retrain_assets.policy.thresholds import set_settings
from retrain_assets.store.snapshots import latest_snapshots
from retrain_assets_tests.policy.days import day
from retrain_assets_tests.policy.policy_world import SETTINGS, no_drift, tick, trained_through


def decide(db, last, now, customer="acme"):
    return policy_outcome(customer, SETTINGS, latest_snapshots(db), last, None, None, now, no_drift)


def test_a_customer_whose_files_stopped_is_deferred_not_scheduled(db, publish):
    publish(0, 39, {"acme": 100, "bolt": 100})
    last = trained_through(db, 39)
    publish(40, 42, {"acme": 100, "bolt": 100})  # three new days of acme's, then it stops
    publish(43, 59, {"bolt": 100})  # the others go on
    late = last.decided_at + dt.timedelta(days=SETTINGS.schedule_days, minutes=1)
    outcome = decide(db, last, late)  # the schedule would be due: 3 new days of acme's
    assert (outcome.action, outcome.kind) == ("skip", "no data")
    assert outcome.reason == (
        f"deferred: no data from acme since {day(42)} (its newest day with rows; published up "
        f"to {day(59)}): the window {day(0)} .. {day(59)} would hold 0 holdout rows of it "
        "(needs >= 7); no training is decided until its rows arrive"
    )
    assert outcome.details == {
        "no_data_since": day(42).isoformat(),
        "published_up_to": day(59).isoformat(),
    }
    assert decide(db, last, late, customer="bolt").action == "decide"  # the others still train


def test_a_first_training_on_a_window_without_the_customers_rows_is_deferred(db, publish):
    publish(0, 29, {"acme": 100, "bolt": 100})
    publish(30, 40, {"bolt": 100})
    now = dt.datetime.now(dt.UTC)
    first = policy_outcome("acme", SETTINGS, latest_snapshots(db), None, None, None, now, no_drift)
    assert first.kind == "no data" and f"no data from acme since {day(29)}" in first.reason


def test_the_deferral_is_recorded_shown_and_cleared_when_rows_arrive(db):
    record_deferral(db, "acme", "deferred: no data from acme since 2026-02-12", day(42), day(59))
    record_deferral(db, "acme", "deferred: no data from acme since 2026-02-12", day(42), day(60))
    [kept] = deferrals(db)
    assert (kept.no_data_since, kept.published_up_to) == (day(42), day(60))
    assert kept.first_deferred_at <= kept.last_deferred_at
    [line] = deferral_lines(db, "acme")
    assert line.startswith("acme                 policy    deferred since ")
    assert line.endswith(": deferred: no data from acme since 2026-02-12")
    assert clear_deferrals(db, ["acme", "bolt"]) == 1
    assert deferrals(db) == []


def test_the_sensor_records_the_deferral_and_drops_it_once_rows_arrive(
    db, publish, instance, tmp_path
):
    for name in ("acme", "bolt"):
        set_settings(db, name, {"min_history_days": 20}, "test")
    publish(0, 29, {"acme": 100, "bolt": 100})
    publish(30, 40, {"bolt": 100})
    result = tick(instance, db, tmp_path)
    [request] = result.run_requests  # bolt trains; acme does not
    assert request.partition_key == "bolt"
    [deferred] = deferrals(db)
    assert (deferred.customer, deferred.no_data_since, deferred.published_up_to) == (
        "acme",
        day(29),
        day(40),
    )
    assert [d.customer for d in list_decisions(db)] == ["bolt"]
    publish(41, 50, {"acme": 100, "bolt": 100})  # acme's files arrive again
    tick(instance, db, tmp_path)
    assert deferrals(db) == []
    assert "acme" in [d.customer for d in list_decisions(db)]


def test_the_policy_judges_the_holdout_training_job_judges(db, publish, monkeypatch):
    """RETRAIN_GATE_WINDOWS=4: a 28-day holdout, not 7, for the policy as for training_job."""
    import pandas as pd

    from retrain_assets.features.evidence import EvidenceRules, count_rows, judge_window
    from retrain_assets.models.training_job_asset import TrainingJobConfig

    publish(0, 24, {"bolt": 100})
    publish(25, 59, {"acme": 1, "bolt": 100})  # 35 days of acme's: 28 training + 7 holdout
    now = dt.datetime.now(dt.UTC)
    assert decide(db, None, now).action == "decide"  # one 7-day window: enough
    monkeypatch.setenv("RETRAIN_GATE_WINDOWS", "4")
    outcome = decide(db, None, now)
    assert (outcome.action, outcome.kind) == ("skip", "no data")
    assert outcome.reason == (
        f"deferred: the window {day(0)} .. {day(59)} holds 28 holdout rows of acme in its "
        f"28-day holdout {day(32)} .. {day(59)} (needs >= 7) and 7+ training rows (needs >= "
        f"28); its newest day with rows is {day(59)}"
    )
    rows = pd.DataFrame(
        {"customer": "acme", "store_id": "s1", "date": [day(n) for n in range(25, 60)]}
    )
    holdout_days = TrainingJobConfig().export_holdout_days()
    job = judge_window(count_rows(rows, "acme", day(0), day(59), holdout_days), EvidenceRules())
    assert not job.enough  # training_job refuses the same window, on the same numbers
    assert (job.rows.holdout_start, job.rows.holdout_rows, job.rows.train_rows) == (day(32), 28, 7)
