"""The policy's chains that used to need a whole platform, run in process on real Postgres.

The sensor is evaluated with `build_sensor_context` on a Postgres-backed instance and the
approval job executed as the UI launches it (`execute_in_process`, the customer's partition);
what the daemon adds (ticking, launching the requests) is the live demo's to show
(runtime/test_live_demo_system.py). docs/tests.md lists the platform tests these replaced.
"""

from __future__ import annotations

import dagster as dg

from retrain_assets.policy.alerts import pending_alerts, raise_alert
from retrain_assets.policy.approval import APPROVED_BY, approve_drift_retraining
from retrain_assets.policy.decisions import list_decisions
from retrain_assets.policy.drift import DriftMeasure
from retrain_assets.policy.evaluation import PolicyState
from retrain_assets.policy.thresholds import set_settings
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets_tests.policy.days import day
from retrain_assets_tests.policy.policy_world import tick, trained_through


def test_new_days_crossing_the_volume_threshold_request_one_run_for_that_customer_only(
    db, publish, instance, tmp_path
):
    publish(0, 39, {"acme": 100, "bolt": 10})
    for customer in ("acme", "bolt"):
        set_settings(db, customer, {"min_new_rows": 500, "drift_threshold": 100.0}, "test")
        trained_through(db, 39, customer)
    publish(40, 44, {"acme": 100, "bolt": 10})  # 500 new rows for acme, 50 for bolt
    result = tick(instance, db, tmp_path)
    [request] = result.run_requests
    [decision] = [d for d in list_decisions(db) if d.policy == "volume"]
    assert (decision.customer, decision.decided_by) == ("acme", "retraining_policy sensor")
    assert request.partition_key == "acme" and request.run_key == f"decision-{decision.id}"
    assert request.tags["retrain/policy"] == "volume"
    assert request.tags["retrain/decision_id"] == str(decision.id)
    again = tick(instance, db, tmp_path)  # the same tick evaluated again: the same request
    assert [r.run_key for r in again.run_requests] == [request.run_key]
    assert len([d for d in list_decisions(db) if d.policy == "volume"]) == 1


def test_an_alert_approved_from_the_approval_job_is_one_drift_decision_the_sensor_launches(
    db, publish, instance, tmp_path
):
    publish(0, 29, {"acme": 10})
    trained = trained_through(db, 29)
    raise_alert(db, "acme", trained.id, DriftMeasure(1.2, "price", day(28), day(29)), 0.5)
    resources = {"project_db": ProjectDatabase(url=db)}

    approved = approve_drift_retraining.execute_in_process(
        instance=instance, partition_key="acme", resources=resources
    )

    assert approved.success
    [drift] = [d for d in list_decisions(db) if d.policy == "drift"]
    assert (drift.customer, drift.decided_by) == ("acme", APPROVED_BY)
    assert pending_alerts(db) == {}
    [request] = tick(instance, db, tmp_path).run_requests
    assert (request.partition_key, request.run_key) == ("acme", f"decision-{drift.id}")
    assert request.tags["retrain/policy"] == "drift"
    refused = approve_drift_retraining.execute_in_process(
        instance=instance, partition_key="acme", resources=resources, raise_on_error=False
    )
    assert not refused.success  # one alert, one approval: the second run fails and says why
    failure = next(
        e for e in refused.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE
    )
    assert "no drift alert is waiting for approval for acme" in str(failure.event_specific_data)
    assert len([d for d in list_decisions(db) if d.policy == "drift"]) == 1


def test_drift_approved_automatically_is_a_drift_decision_the_sensor_requests_at_once(
    db, publish, instance, tmp_path, monkeypatch
):
    monkeypatch.setenv("RETRAIN_DRIFT_APPROVAL", "auto")
    publish(0, 29, {"acme": 10})
    trained = trained_through(db, 29)
    raise_alert(db, "acme", trained.id, DriftMeasure(1.2, "price", day(28), day(29)), 0.5)
    publish(30, 36, {"acme": 10})  # drift's 7 new days; 70 rows, far from the volume's 1000

    def drifted(self, last, recent):  # the feature files' measure, over the threshold
        return DriftMeasure(2.5, "price", recent[0], recent[-1])

    monkeypatch.setattr(PolicyState, "drift_of", drifted)
    [request] = tick(instance, db, tmp_path).run_requests
    [drift] = [d for d in list_decisions(db) if d.policy == "drift"]
    assert (drift.customer, drift.decided_by) == ("acme", "retraining_policy sensor")
    assert "approved automatically (RETRAIN_DRIFT_APPROVAL=auto)" in drift.reason
    assert (request.partition_key, request.run_key) == ("acme", f"decision-{drift.id}")
    assert request.tags["retrain/policy"] == "drift"
    assert pending_alerts(db) == {}  # the decision answered the alert a person never approved
