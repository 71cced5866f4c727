"""The sensor and the approval in-process, on real Postgres and a Dagster instance for test."""

import time

import dagster as dg
import pytest

# Not exported at Dagster's top level in 1.13; what the backfill daemon stores.
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill

import retrain_assets.automation.retraining_policy as policy_module
from retrain_assets.automation.retraining_policy import policy_interval_seconds, retraining_policy
from retrain_assets.customers import CUSTOMERS
from retrain_assets.definitions import FEATURES_JOB, build_definitions
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.machines.runs import start_run
from retrain_assets.machines.training import training_machine
from retrain_assets.policy.alerts import pending_alerts, raise_alert
from retrain_assets.policy.approval import approve
from retrain_assets.policy.decisions import DecisionRefused, list_decisions, record_decision
from retrain_assets.policy.drift import DriftMeasure
from retrain_assets.policy.history import choose_window
from retrain_assets.policy.thresholds import set_settings
from retrain_assets.store.database import transaction
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets.store.snapshots import latest_snapshots
from retrain_assets_tests.policy.days import day
from retrain_assets_tests.policy.policy_world import tick


def test_a_tick_evaluated_twice_decides_once_and_requests_the_same_run_key(
    db, publish, instance, tmp_path
):
    publish(0, 24, {"acme": 10, "bolt": 10})
    waiting = tick(instance, db, tmp_path)
    assert waiting.run_requests == [] and list_decisions(db) == []
    assert waiting.skip_reason.skip_message == (
        "acme: not enough history yet: 25 of 56 days published with rows for this customer; "
        "bolt: not enough history yet: 25 of 56 days published with rows for this customer"
    )
    set_settings(db, "acme", {"min_history_days": 20}, "test")
    first, again = tick(instance, db, tmp_path), tick(instance, db, tmp_path)
    [decision] = list_decisions(db)
    assert (decision.customer, decision.policy, decision.dagster_run_id) == (
        "acme",
        "schedule",
        None,
    )
    for result in (first, again):
        [request] = result.run_requests
        assert request.run_key == f"decision-{decision.id}" and request.partition_key == "acme"
        assert request.tags["retrain/decision_id"] == str(decision.id)
        config = request.run_config["ops"]["training_job"]["config"]
        assert config["decision_id"] == decision.id
        assert (config["first_day"], config["last_day"]) == (day(0).isoformat(), "2026-01-25")
        assert config["data_versions"] == decision.data_versions


def test_no_snapshot_yet_is_a_skip_with_the_reason(db, instance, tmp_path):
    result = tick(instance, db, tmp_path)
    assert result.run_requests == []
    assert result.skip_reason.skip_message == "no feature snapshot is published yet"


def test_the_interval_is_configurable_and_checked(monkeypatch):
    monkeypatch.setenv("RETRAIN_POLICY_INTERVAL_SECONDS", "2")
    assert policy_interval_seconds() == 2
    monkeypatch.setenv("RETRAIN_POLICY_INTERVAL_SECONDS", "soon")
    with pytest.raises(ValueError, match="RETRAIN_POLICY_INTERVAL_SECONDS=soon: must be a whole"):
        policy_interval_seconds()


def test_an_approval_needs_a_known_customer_and_a_pending_alert(db, publish, instance):
    publish(0, 29, {"acme": 10})
    ref = choose_window(latest_snapshots(db), 90)
    with pytest.raises(DecisionRefused, match="unknown customer 'nobody'"):
        approve(db, instance, "nobody", "ana", "run-1")
    with pytest.raises(DecisionRefused, match="no drift alert is waiting for approval for acme"):
        approve(db, instance, "acme", "ana", "run-1")
    trained = record_decision(db, "acme", "manual", "t", ref, "t", dagster_run_id="r0")
    raise_alert(db, "acme", trained.id, DriftMeasure(1.2, "price", day(28), day(29)), 0.5)
    decision = approve(db, instance, "acme", "ana", "run-1")
    assert (decision.policy, decision.decided_by, decision.dagster_run_id) == ("drift", "ana", None)
    assert decision.reason.startswith("drift: price moved 1.20 standard deviations")
    assert pending_alerts(db) == {}
    with pytest.raises(DecisionRefused, match="no drift alert is waiting"):
        approve(db, instance, "acme", "ana", "run-2")  # one approval, one decision


def test_a_customer_whose_machine_or_training_run_is_busy_gets_no_decision(
    db, publish, instance, tmp_path
):
    for customer in ("acme", "bolt"):
        set_settings(db, customer, {"min_history_days": 20}, "test")
    publish(0, 24, {"acme": 10, "bolt": 10})
    start_run(db, training_machine(), "acme", "key-1", {"spec": {}})
    running = dg.DagsterRun(
        job_name="__ASSET_JOB",
        run_id="started-run",
        status=dg.DagsterRunStatus.STARTED,
        tags={"dagster/partition": "bolt"},
        asset_selection=frozenset({dg.AssetKey("training_job")}),
    )
    instance.add_run(running)
    result = tick(instance, db, tmp_path)
    assert result.run_requests == [] and list_decisions(db) == []
    assert result.skip_reason.skip_message == (
        "acme: busy (training machine in INITIAL): no new decision until it finishes; "
        "bolt: busy (training_job run started-run not finished): no new decision until it finishes"
    )


def test_a_tick_out_of_budget_hands_the_next_tick_the_customers_it_did_not_reach(
    db, publish, instance, tmp_path, monkeypatch
):
    publish(0, 24, {"acme": 10, "bolt": 10})
    seconds = iter(range(0, 10_000, 30))  # every reading of the clock is 30 s later
    monkeypatch.setattr(policy_module, "clock", lambda: next(seconds))
    resources = {
        "project_db": ProjectDatabase(url=db),
        "partition_storage": PartitionStorage(base_url=str(tmp_path / "storage")),
    }

    def tick_at(cursor: str | None) -> dg.SensorResult:
        context = dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor)
        return retraining_policy(context)

    first = tick_at(None)  # budget 40 s: acme at 30 s, bolt at 60 s is out of it
    assert first.skip_reason.skip_message.startswith("acme: not enough history yet")
    assert "bolt: deferred to the next tick (tick budget used)" in first.skip_reason.skip_message
    assert first.cursor == "bolt"
    second = tick_at(first.cursor)
    assert second.skip_reason.skip_message.startswith("bolt: not enough history yet")
    assert "acme: deferred" in second.skip_reason.skip_message and second.cursor == "acme"
    assert policy_module.in_turn(["a", "b", "c"], "b") == ["b", "c", "a"]
    assert policy_module.in_turn(["a", "c"], "b") == ["c", "a"]  # "b" was removed since
    assert policy_module.in_turn(["a", "c"], "") == ["a", "c"]


def test_an_unsafe_partition_added_by_hand_is_never_evaluated(db, publish, instance, tmp_path):
    instance.add_dynamic_partitions(CUSTOMERS.name, ["../x/y"])
    publish(0, 24, {"acme": 10, "bolt": 10})
    result = tick(instance, db, tmp_path)
    assert result.skip_reason.skip_message == (
        "acme: not enough history yet: 25 of 56 days published with rows for this customer; "
        "bolt: not enough history yet: 25 of 56 days published with rows for this customer"
    )


def test_open_decisions_with_no_snapshot_or_no_customer_still_make_a_valid_tick(
    db, publish, instance, tmp_path
):
    """Requests and a skip reason cannot go together: the requests win, the reason is logged."""
    publish(0, 9, {"acme": 10})
    ref = choose_window(latest_snapshots(db), 90)
    decision = record_decision(db, "acme", "manual", "by hand", ref, "ana")
    with transaction(db) as cur:  # nothing published any more (a new storage, a clean-up)
        cur.execute("DELETE FROM feature_snapshots")
    result = tick(instance, db, tmp_path)
    assert [r.run_key for r in result.run_requests] == [f"decision-{decision.id}"]
    assert result.skip_reason is None
    with dg.instance_for_test() as empty:  # no customer partition known
        result = tick(empty, db, tmp_path)
    assert [r.run_key for r in result.run_requests] == [f"decision-{decision.id}"]


def feature_run(instance, status, run_id="features-run", selection=("store_day_features",)):
    run = dg.DagsterRun(
        job_name="__ASSET_JOB",
        run_id=run_id,
        status=status,
        tags={"dagster/asset_partition_range_start": day(0).isoformat()},
        asset_selection=frozenset(dg.AssetKey(name) for name in selection),
    )
    instance.add_run(run)
    return run


def test_no_decision_while_a_run_publishes_feature_days(db, publish, instance, tmp_path):
    set_settings(db, "acme", {"min_history_days": 20}, "test")
    publish(0, 24, {"acme": 10})  # enough history, but the backfill is still going
    feature_run(instance, dg.DagsterRunStatus.STARTED)
    held = tick(instance, db, tmp_path)
    assert held.run_requests == [] and list_decisions(db) == []
    assert held.skip_reason.skip_message == (
        "no decision while feature days are being published (decisions wait for settled "
        "data): run features-run (store_day_features, STARTED)"
    )
    instance.delete_run("features-run")
    feature_run(instance, dg.DagsterRunStatus.NOT_STARTED, "sales-run", ("sales",))
    message = tick(instance, db, tmp_path).skip_reason.skip_message
    assert "run sales-run (sales, NOT_STARTED)" in message
    instance.delete_run("sales-run")
    feature_run(instance, dg.DagsterRunStatus.SUCCESS)  # done: the data is settled
    [decision] = [r.run_key for r in tick(instance, db, tmp_path).run_requests]
    assert decision == f"decision-{list_decisions(db)[0].id}"


def test_a_whole_features_job_run_and_a_backfill_not_launched_yet_hold_decisions_too(
    db, publish, instance, tmp_path, monkeypatch
):
    monkeypatch.setenv("RETRAIN_APP_PG_URL", db)  # what `up` exports; the job's config reads it
    set_settings(db, "acme", {"min_history_days": 20}, "test")
    publish(0, 24, {"acme": 10})
    job = build_definitions().resolve_job_def(FEATURES_JOB)
    # (a QUEUED run needs a code location's origin; STARTING is as unfinished)
    queued = instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTING)
    assert not queued.asset_selection  # a whole job records no selection: its plan is read
    message = tick(instance, db, tmp_path).skip_reason.skip_message
    assert f"run {queued.run_id} (sales, store_day_features, STARTING)" in message
    instance.delete_run(queued.run_id)
    instance.add_backfill(
        PartitionBackfill(
            "bf-history",
            BulkActionStatus.REQUESTED,
            False,
            {},
            time.time(),
            asset_selection=[dg.AssetKey("store_day_features")],
            serialized_asset_backfill_data="{}",
        )
    )
    message = tick(instance, db, tmp_path).skip_reason.skip_message
    assert message.endswith("backfill bf-history (store_day_features, not launched yet)")
    feature_run(instance, dg.DagsterRunStatus.SUCCESS, "bf-run")
    instance.add_run_tags("bf-run", {"dagster/backfill": "bf-history"})
    assert len(tick(instance, db, tmp_path).run_requests) == 1  # its run ended: settled
