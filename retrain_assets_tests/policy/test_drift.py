"""The drift measure on real feature files: a stable customer stays low, a shifted one is high."""

import numpy as np
import pandas as pd
import pytest

from retrain_assets.features.parquet_store import MissingPartitionError, ParquetPartitionStore
from retrain_assets.policy.decisions import record_decision
from retrain_assets.policy.drift import (
    DRIFT_FEATURES,
    Baselines,
    DayFrames,
    measure_drift,
    standardized_shift,
)
from retrain_assets.store.snapshot_ref import SnapshotRef
from retrain_assets_tests.policy.days import day


def write_days(store: ParquetPartitionStore, first: int, last: int, shift: float) -> None:
    """Write feature days for `acme` (shifted by `shift` units from day 20) and stable `bolt`."""
    rng = np.random.default_rng(first)
    for n in range(first, last + 1):
        rows = []
        for customer, offset in (("acme", shift if n >= 20 else 0.0), ("bolt", 0.0)):
            for item in range(30):
                rows.append(
                    {
                        "customer": customer,
                        "store_id": "s1",
                        "item_id": f"i{item}",
                        "rolling_mean_7": 10 + offset + rng.normal(0, 2),
                        "rolling_mean_28": 10 + rng.normal(0, 2),
                        "price": 5 + rng.normal(0, 0.5),
                        "on_promo": bool(rng.random() < 0.1),
                    }
                )
        store.write("store_day_features", day(n).isoformat(), pd.DataFrame(rows))


def test_a_shift_in_one_feature_is_measured_in_training_standard_deviations(db, tmp_path):
    store = ParquetPartitionStore(str(tmp_path / "storage"))
    write_days(store, 0, 26, shift=6.0)
    window = [day(n) for n in range(20)]
    recent = [day(n) for n in range(20, 27)]
    ref = SnapshotRef(window[0], window[-1], {d.isoformat(): "v" for d in window})
    frames = DayFrames(store)
    decisions = {
        customer: record_decision(db, customer, "manual", "t", ref, "t", dagster_run_id="r").id
        for customer in ("acme", "bolt")
    }
    baselines = Baselines(db, frames, decisions.values())
    for customer, decision_id in decisions.items():
        drift = measure_drift(baselines.of(decision_id, customer, window), customer, recent, frames)
        if customer == "acme":
            assert drift.feature == "rolling_mean_7" and 2.0 < drift.value < 4.0  # 6 / ~2
        else:
            assert drift.value < 0.5
        assert (drift.recent_first, drift.recent_last) == (day(20), day(26))
    assert baselines.save() == 2 and baselines.save() == 0

    # The baseline is stored once per decision: a later tick does not read the window again.
    for n in range(20):
        store.path("store_day_features", day(n).isoformat()).unlink()
    bolt = decisions["bolt"]
    later = Baselines(db, DayFrames(store), decisions.values())
    assert later.of(bolt, "bolt", window) == baselines.of(bolt, "bolt", window)
    with pytest.raises(MissingPartitionError, match="is published but"):
        later.of(bolt + 1000, "bolt", window)


def test_features_that_never_varied_or_are_missing_do_not_count():
    baseline = {
        "price": {"mean": 5.0, "std": 0.0, "n": 10},
        "rolling_mean_7": {"mean": 10.0, "std": 2.0, "n": 10},
    }
    assert standardized_shift(baseline, {"price": {"mean": 9.0, "std": 1.0, "n": 3}}) == (0.0, "")
    recent = {"rolling_mean_7": {"mean": 7.0, "std": 1.0, "n": 3}}
    assert standardized_shift(baseline, recent) == (1.5, "rolling_mean_7")


def test_days_are_read_once_per_tick(tmp_path):
    store = ParquetPartitionStore(str(tmp_path / "storage"))
    write_days(store, 0, 1, shift=0.0)
    frames = DayFrames(store)
    first = frames.stats("acme", [day(0), day(1)])
    store.path("store_day_features", day(0).isoformat()).unlink()
    assert frames.stats("bolt", [day(0)])["price"]["n"] == 30
    assert first["rolling_mean_7"]["n"] == 60
    assert frames.stats("nobody", [day(0)]) == {}


def test_statistics_added_up_from_daily_sums_equal_those_of_the_rows(tmp_path):
    store = ParquetPartitionStore(str(tmp_path / "storage"))
    write_days(store, 18, 22, shift=6.0)
    paths = [store.path("store_day_features", day(n).isoformat()) for n in (18, 21, 22)]
    rows = pd.concat([pd.read_parquet(path) for path in paths], ignore_index=True)
    rows.loc[:4, "price"] = np.nan  # day 18: a missing value is left out, not counted
    store.write("store_day_features", day(18).isoformat(), rows.iloc[:60])
    stats = DayFrames(store).stats("acme", [day(22), day(18), day(21)])
    acme = rows[rows["customer"] == "acme"]
    for feature in DRIFT_FEATURES:
        values = acme[feature].astype(float).dropna()
        assert stats[feature]["n"] == len(values)
        assert stats[feature]["mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert stats[feature]["std"] == pytest.approx(values.std(ddof=0), rel=1e-9)
