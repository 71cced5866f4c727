"""What the policy's in-process tests share: their thresholds, a drift that never fires, a
customer trained through a given day, and one tick of the real sensor."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg

from retrain_assets.automation.retraining_policy import retraining_policy
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.policy.decisions import Decision, record_decision
from retrain_assets.policy.drift import DriftMeasure
from retrain_assets.policy.history import choose_window
from retrain_assets.policy.thresholds import DEFAULTS, PolicySettings
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets.store.snapshots import latest_snapshots
from retrain_assets_tests.policy.days import day

SETTINGS = PolicySettings(min_new_rows=500, min_history_days=20, drift_recent_days=3)


def no_drift(last: Decision, recent: list[dt.date]) -> DriftMeasure:
    """A drift measure below every threshold."""
    return DriftMeasure(0.1, "price", recent[0], recent[-1])


def trained_through(db: str, last: int, customer: str = "acme") -> Decision:
    """Record a decision on days 0..last, as if the customer was trained on them."""
    ref = choose_window(latest_snapshots(db), DEFAULTS.window_days)
    assert ref.last_day == day(last)
    return record_decision(db, customer, "manual", "test", ref, "test", dagster_run_id="r1")


def tick(instance: dg.DagsterInstance, db: str, tmp_path: Path) -> dg.SensorResult:
    """Evaluate the retraining_policy sensor once against `db`."""
    resources = {
        "project_db": ProjectDatabase(url=db),
        "partition_storage": PartitionStorage(base_url=str(tmp_path / "storage")),
    }
    return retraining_policy(dg.build_sensor_context(instance=instance, resources=resources))
