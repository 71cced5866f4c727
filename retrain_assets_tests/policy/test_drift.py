"""The drift measure on real feature files: a stable customer stays low, a shifted one is high."""

import numpy as np
import pandas as pd
import pytest

from retrain_assets.features.parquet_store import MissingPartitionError, ParquetPartitionStore
from retrain_assets.models.snapshot_ref import SnapshotRef
from retrain_assets.policy.decisions import record_decision
from retrain_assets.policy.drift import (
    DayFrames,
    baseline_stats,
    measure_drift,
    standardized_shift,
)
from retrain_assets_tests.policy.conftest import day


def write_days(store: ParquetPartitionStore, first: int, last: int, shift: float) -> None:
    """Write feature days for `acme` (shifted by `shift` units from day 20) and stable `bolt`."""
    rng = np.random.default_rng(first)
    for n in range(first, last + 1):
        rows = []
        for customer, offset in (("acme", shift if n >= 20 else 0.0), ("bolt", 0.0)):
            for item in range(30):
                rows.append({
                    "customer": customer, "store_id": "s1", "item_id": f"i{item}",
                    "rolling_mean_7": 10 + offset + rng.normal(0, 2),
                    "rolling_mean_28": 10 + rng.normal(0, 2), "price": 5 + rng.normal(0, 0.5),
                    "on_promo": bool(rng.random() < 0.1),
                })
        store.write("store_day_features", day(n).isoformat(), pd.DataFrame(rows))


def test_a_shift_in_one_feature_is_measured_in_training_standard_deviations(db, tmp_path):
    store = ParquetPartitionStore(str(tmp_path / "storage"))
    write_days(store, 0, 26, shift=6.0)
    window = [day(n) for n in range(20)]
    recent = [day(n) for n in range(20, 27)]
    ref = SnapshotRef(window[0], window[-1], {d.isoformat(): "v" for d in window})
    frames = DayFrames(store)
    for customer in ("acme", "bolt"):
        decision = record_decision(db, customer, "manual", "t", ref, "t", dagster_run_id="r")
        baseline = baseline_stats(db, decision.id, customer, window, frames)
        drift = measure_drift(baseline, customer, recent, frames)
        if customer == "acme":
            assert drift.feature == "rolling_mean_7" and 2.0 < drift.value < 4.0  # 6 / ~2
        else:
            assert drift.value < 0.5
        assert (drift.recent_first, drift.recent_last) == (day(20), day(26))

    # The baseline is stored once per decision: a later tick does not read the window again.
    for n in range(20):
        store.path("store_day_features", day(n).isoformat()).unlink()
    again = baseline_stats(db, decision.id, "bolt", window, DayFrames(store))
    assert again == baseline
    with pytest.raises(MissingPartitionError, match="is published but"):
        baseline_stats(db, decision.id + 1000, "bolt", window, DayFrames(store))


def test_features_that_never_varied_or_are_missing_do_not_count():
    baseline = {"price": {"mean": 5.0, "std": 0.0, "n": 10},
                "rolling_mean_7": {"mean": 10.0, "std": 2.0, "n": 10}}
    assert standardized_shift(baseline, {"price": {"mean": 9.0, "std": 1.0, "n": 3}}) == (0.0, "")
    recent = {"rolling_mean_7": {"mean": 7.0, "std": 1.0, "n": 3}}
    assert standardized_shift(baseline, recent) == (1.5, "rolling_mean_7")


def test_days_are_read_once_per_tick(tmp_path):
    store = ParquetPartitionStore(str(tmp_path / "storage"))
    write_days(store, 0, 1, shift=0.0)
    frames = DayFrames(store)
    first = frames.customer_rows("acme", [day(0), day(1)])
    store.path("store_day_features", day(0).isoformat()).unlink()
    assert frames.customer_rows("bolt", [day(0)]).shape[0] == 30
    assert len(first) == 60 and set(first["customer"]) == {"acme"}
