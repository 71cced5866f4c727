"""Decisions as rows: one open decision per customer, each used by one run and its re-runs."""

import dagster as dg
import pytest

from retrain_assets.cli import main
from retrain_assets.policy.alerts import pending_alerts, raise_alert
from retrain_assets.policy.decisions import (
    DecisionRefused,
    claim_decision,
    open_decisions,
    record_decision,
)
from retrain_assets.policy.drift import DriftMeasure
from retrain_assets.policy.history import choose_window
from retrain_assets.policy.run_decision import claim_for_run, manual_decision
from retrain_assets.store.snapshots import latest_snapshots
from retrain_assets_tests.policy.days import day


@pytest.fixture
def ref(db, publish):
    publish(0, 29, {"acme": 10, "bolt": 10})
    return choose_window(latest_snapshots(db), 90)


def run(run_id: str, **tags: str) -> dg.DagsterRun:
    return dg.DagsterRun(job_name="__ASSET_JOB", run_id=run_id, tags=tags)


def test_a_customer_has_at_most_one_open_decision(db, ref):
    first = record_decision(db, "acme", "volume", "r", ref, "sensor")
    with pytest.raises(DecisionRefused, match=f"acme already has open decision {first.id}"):
        record_decision(db, "acme", "schedule", "r", ref, "another sensor evaluation")
    record_decision(db, "bolt", "volume", "r", ref, "sensor")
    assert [d.customer for d in open_decisions(db)] == ["acme", "bolt"]
    claim_decision(db, first.id, "acme", "run-1", set())
    assert [d.customer for d in open_decisions(db)] == ["bolt"]
    record_decision(db, "acme", "schedule", "r", ref, "sensor")  # once launched, a new one may


def test_a_decision_trains_once_for_its_customer_and_its_re_executions(db, ref):
    decision = record_decision(db, "acme", "volume", "r", ref, "sensor")
    requested = (None, None, {})
    assert claim_for_run(db, "acme", decision.id, requested, run("run-1")).id == decision.id
    assert claim_for_run(db, "acme", decision.id, requested, run("run-1")).id == decision.id
    again = run("run-2", **{"dagster/parent_run_id": "run-1", "dagster/root_run_id": "run-1"})
    assert claim_for_run(db, "acme", decision.id, requested, again).dagster_run_id == "run-1"
    with pytest.raises(DecisionRefused, match="already used by run run-1"):
        claim_for_run(db, "acme", decision.id, requested, run("run-3"))
    with pytest.raises(DecisionRefused, match=f"decision {decision.id} is for acme, not bolt"):
        claim_for_run(db, "bolt", decision.id, requested, run("run-1"))
    with pytest.raises(DecisionRefused, match="decision 999999 does not exist"):
        claim_for_run(db, "acme", 999_999, requested, run("run-1"))


def test_a_run_config_naming_another_snapshot_than_its_decision_is_refused(db, ref):
    decision = record_decision(db, "acme", "volume", "r", ref, "sensor")
    other = (day(5).isoformat(), ref.last_day.isoformat(), {})
    with pytest.raises(DecisionRefused, match=r"run config \['first_day'\] differ"):
        claim_for_run(db, "acme", decision.id, other, run("run-1"))
    same = (ref.first_day.isoformat(), ref.last_day.isoformat(), ref.data_versions)
    assert claim_for_run(db, "acme", decision.id, same, run("run-1")).id == decision.id


def test_a_manual_run_records_one_manual_decision_and_resolves_a_drift_alert(db, ref):
    record = record_decision(db, "acme", "manual", "earlier", ref, "x", dagster_run_id="r0")
    drift = DriftMeasure(1.0, "price", day(28), day(29))
    raise_alert(db, "acme", record.id, drift, 0.5)
    assert set(pending_alerts(db)) == {"acme"}
    manual = manual_decision(db, "acme", ref, run("run-9", **{"dagster/user": "ana@example"}))
    assert (manual.policy, manual.decided_by, manual.dagster_run_id) == (
        "manual",
        "ana@example",
        "run-9",
    )
    assert pending_alerts(db) == {}
    rerun = run("run-10", **{"dagster/parent_run_id": "run-9", "dagster/root_run_id": "run-9"})
    assert manual_decision(db, "acme", ref, rerun).id == manual.id
    anonymous = manual_decision(db, "bolt", ref, run("run-11"))
    assert anonymous.decided_by == "manual via the Dagster UI"


def test_the_cli_lists_decisions_newest_first(db, ref, monkeypatch, capsys):
    monkeypatch.setenv("RETRAIN_APP_PG_URL", db)
    assert main(["decisions"]) == 0
    assert capsys.readouterr().out.strip() == "no retraining decisions yet"
    first = record_decision(db, "acme", "volume", "volume: 500 new rows", ref, "sensor")
    claim_decision(db, first.id, "acme", "run-1", set())
    second = record_decision(db, "bolt", "schedule", "first training", ref, "sensor")
    assert main(["decisions"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[0] == str(second.id) and "(not launched yet)" in lines[0]
    assert lines[1].strip() == "first training"
    assert lines[2].split()[0] == str(first.id) and lines[2].endswith("run run-1")
    assert main(["decisions", "--customer", "acme"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
