"""The drift measure: how far a customer's recent features moved from its training window.

Per feature, the shift of the recent mean in standard deviations of the training window
(`|mean_recent - mean_train| / std_train`); the measure is the largest shift. The training
window's statistics are computed once per decision and kept in `drift_baselines`; the recent
days are read once per sensor tick, however many customers need them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd
from psycopg2.extras import Json

from retrain_assets.features.parquet_store import MissingPartitionError, ParquetPartitionStore
from retrain_assets.store.database import transaction

ASSET = "store_day_features"
DRIFT_FEATURES = ("rolling_mean_7", "rolling_mean_28", "price", "on_promo")
Stats = dict[str, dict[str, float]]  # feature -> {"mean", "std", "n"}


@dataclass(frozen=True)
class DriftMeasure:
    """The largest standardized mean shift, which feature it was, and over which days."""

    value: float
    feature: str
    recent_first: dt.date
    recent_last: dt.date


class DayFrames:
    """Reads the drift columns of feature days, each day at most once per instance.

    A day is split by customer when it is read, so asking for one customer's rows costs a
    dictionary lookup, not a scan of every customer's rows: a tick over C customers reads and
    splits each day once instead of filtering it C times.
    """

    def __init__(self, store: ParquetPartitionStore) -> None:
        """Keep the store; nothing is read until asked."""
        self.store = store
        self._days: dict[dt.date, dict[str, pd.DataFrame]] = {}

    def _by_customer(self, day: dt.date) -> dict[str, pd.DataFrame]:
        """Return the day's drift columns split by customer, reading the file the first time."""
        if day not in self._days:
            path = self.store.path(ASSET, day.isoformat())
            if not path.exists():
                raise MissingPartitionError(f"{ASSET} {day} is published but {path} is gone")
            with path.open("rb") as handle:
                frame = pd.read_parquet(handle, columns=["customer", *DRIFT_FEATURES])
            self._days[day] = {
                str(name): rows for name, rows in frame.groupby("customer", sort=False)
            }
        return self._days[day]

    def customer_rows(self, customer: str, days: Iterable[dt.date]) -> pd.DataFrame:
        """Return the customer's drift columns on these days (no rows: an empty frame).

        Raises:
            MissingPartitionError: a published day has no file in storage.
        """
        frames = [
            rows for day in days
            if (rows := self._by_customer(day).get(customer)) is not None
        ]
        if not frames:
            return pd.DataFrame(columns=["customer", *DRIFT_FEATURES])
        return pd.concat(frames, ignore_index=True)


def feature_stats(rows: pd.DataFrame) -> Stats:
    """Return each drift feature's mean, standard deviation and count (NaN rows left out)."""
    stats: Stats = {}
    for feature in DRIFT_FEATURES:
        values = rows[feature].astype(float).dropna() if len(rows) else pd.Series(dtype=float)
        if len(values):
            stats[feature] = {
                "mean": float(values.mean()), "std": float(values.std(ddof=0)), "n": len(values)
            }
    return stats


def standardized_shift(baseline: Stats, recent: Stats) -> tuple[float, str]:
    """Return the largest |recent mean - baseline mean| / baseline std, and its feature.

    A feature that never varied in the baseline (std 0) or is absent on either side says
    nothing about drift and is left out; with no comparable feature the shift is 0.
    """
    best, which = 0.0, ""
    for feature, base in sorted(baseline.items()):
        now = recent.get(feature)
        if now is None or base["std"] <= 0:
            continue
        shift = abs(now["mean"] - base["mean"]) / base["std"]
        if shift > best:
            best, which = shift, feature
    return best, which


def baseline_stats(
    url: str, decision_id: int, customer: str, window: list[dt.date], frames: DayFrames
) -> Stats:
    """Return the decision's training-window statistics, computing and storing them once."""
    with transaction(url) as cur:
        cur.execute("SELECT stats FROM drift_baselines WHERE decision_id = %s", (decision_id,))
        row = cur.fetchone()
    if row is not None:
        return row[0]
    stats = feature_stats(frames.customer_rows(customer, window))
    with transaction(url) as cur:
        cur.execute(
            "INSERT INTO drift_baselines (decision_id, stats) VALUES (%s, %s)"
            " ON CONFLICT (decision_id) DO NOTHING",
            (decision_id, Json(stats)),
        )
    return stats


def measure_drift(
    baseline: Stats, customer: str, recent_days: list[dt.date], frames: DayFrames
) -> DriftMeasure:
    """Return the drift of the customer's recent days against a training baseline."""
    value, feature = standardized_shift(
        baseline, feature_stats(frames.customer_rows(customer, recent_days))
    )
    return DriftMeasure(value, feature, recent_days[0], recent_days[-1])
