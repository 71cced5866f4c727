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
from psycopg2.extras import Json, execute_values

from retrain_assets.asset_keys import STORE_DAY_FEATURES, name_of
from retrain_assets.features.parquet_store import MissingPartitionError, ParquetPartitionStore
from retrain_assets.store.database import transaction

ASSET = name_of(STORE_DAY_FEATURES)
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
    """Per-customer sums of the drift features, each feature day read at most once.

    A day is reduced to (count, sum, sum of squares) per customer and feature when it is read,
    so a tick over C customers reads and groups each day once and keeps only those sums, and a
    customer's statistics over any set of days are added up from them. Customers whose
    decisions share a window share the work: the statistics of one set of days are computed
    once for all customers.
    """

    def __init__(self, store: ParquetPartitionStore) -> None:
        """Keep the store; nothing is read until asked."""
        self.store = store
        self._sums: dict[dt.date, pd.DataFrame] = {}
        self._stats: dict[tuple[dt.date, ...], dict[str, Stats]] = {}

    def stats(self, customer: str, days: Iterable[dt.date]) -> Stats:
        """Return each drift feature's mean, std and count for the customer over these days.

        A feature with no value on these days (or a customer with no rows) is left out.

        Raises:
            MissingPartitionError: a published day has no file in storage.
        """
        key = tuple(sorted(set(days)))
        if key not in self._stats:
            self._stats[key] = self._stats_of_all(key)
        return self._stats[key].get(customer, {})

    def _stats_of_all(self, days: tuple[dt.date, ...]) -> dict[str, Stats]:
        """Return every customer's statistics over `days`, added up from the daily sums."""
        if not days:
            return {}
        sums = [self._day_sums(day) for day in days]
        total = sums[0] if len(sums) == 1 else pd.concat(sums).groupby(level=0).sum()
        features = list(DRIFT_FEATURES)
        count = total["n"][features]
        mean = total["sum"][features] / count.where(count > 0)
        variance = (total["sumsq"][features] / count.where(count > 0) - mean**2).clip(lower=0.0)
        std = variance**0.5
        stats: dict[str, Stats] = {}
        for customer, n_row, mean_row, std_row in zip(
            total.index, count.to_numpy(), mean.to_numpy(), std.to_numpy(), strict=True
        ):
            stats[str(customer)] = {
                feature: {"mean": float(m), "std": float(sd), "n": int(n)}
                for feature, n, m, sd in zip(DRIFT_FEATURES, n_row, mean_row, std_row, strict=True)
                if n > 0
            }
        return stats

    def _day_sums(self, day: dt.date) -> pd.DataFrame:
        """Return the day's (n, sum, sumsq) per customer and feature, reading it the first time."""
        if day not in self._sums:
            path = self.store.path(ASSET, day.isoformat())
            if not path.exists():
                raise MissingPartitionError(f"{ASSET} {day} is published but {path} is gone")
            with path.open("rb") as handle:
                frame = pd.read_parquet(handle, columns=["customer", *DRIFT_FEATURES])
            values = frame[list(DRIFT_FEATURES)].astype(float)
            customers = frame["customer"].astype(str)
            grouped = values.groupby(customers, sort=False)
            self._sums[day] = pd.concat(
                {
                    "n": grouped.count(),
                    "sum": grouped.sum(),
                    "sumsq": (values**2).groupby(customers, sort=False).sum(),
                },
                axis=1,
            )
        return self._sums[day]


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


class Baselines:
    """Training-window statistics per decision: read in one query, new ones saved in one.

    A decision's window never changes, so its statistics are computed once, from the feature
    days, and kept in `drift_baselines`; a later tick reads them instead of the window.
    """

    def __init__(self, url: str, frames: DayFrames, decision_ids: Iterable[int]) -> None:
        """Load the stored statistics of these decisions (the customers' latest ones)."""
        self.url, self.frames = url, frames
        with transaction(url) as cur:
            cur.execute(
                "SELECT decision_id, stats FROM drift_baselines WHERE decision_id = ANY(%s)",
                (list(decision_ids),),
            )
            self._known: dict[int, Stats] = dict(cur.fetchall())
        self._new: dict[int, Stats] = {}

    def stored(self, decision_id: int) -> Stats | None:
        """Return the decision's statistics if they are stored (or computed this tick)."""
        return self._known.get(decision_id)

    def of(self, decision_id: int, customer: str, window: list[dt.date]) -> Stats:
        """Return the decision's statistics, computing them from the window if not stored.

        Raises:
            MissingPartitionError: a day of the window has no file in storage.
        """
        if decision_id not in self._known:
            stats = self.frames.stats(customer, window)
            self._known[decision_id] = self._new[decision_id] = stats
        return self._known[decision_id]

    def save(self) -> int:
        """Store the statistics computed since the last save, in one statement; return how many.

        A decision whose statistics another tick stored meanwhile keeps the stored ones.
        """
        if not self._new:
            return 0
        with transaction(self.url) as cur:
            execute_values(
                cur,
                "INSERT INTO drift_baselines (decision_id, stats) VALUES %s"
                " ON CONFLICT (decision_id) DO NOTHING",
                [(decision_id, Json(stats)) for decision_id, stats in self._new.items()],
            )
        saved, self._new = len(self._new), {}
        return saved


def measure_drift(
    baseline: Stats, customer: str, recent_days: list[dt.date], frames: DayFrames
) -> DriftMeasure:
    """Return the drift of the customer's recent days against a training baseline."""
    value, feature = standardized_shift(baseline, frames.stats(customer, recent_days))
    return DriftMeasure(value, feature, recent_days[0], recent_days[-1])
