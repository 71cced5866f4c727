"""The canary with evidence (issue 26, part 3): a paired interval and a sample size from volume.

A step judged on a dozen rows decides on noise: every rollback of issue 26's demo run was
decided on 11 or 12 rows with actuals. This judges the canary's forecasts and the champion's
shadow forecasts of the same canary-routed rows (the prediction service logs both) and says
how sure it is:

- **the rows a step needs** come from the customer's volume: at least `min_rows` (the floor,
  RETRAIN_CANARY_MIN_ROWS, 50 as Spinnaker's canary guidance asks: on 24 rows of six
  store-days, two equally good models' 90 % interval excluded 0 in 3 of 6 trials) and at
  least `min_days` days of its canary traffic, its rows with actuals a day x the step's share;
  so a large customer's step is not decided on its first hour's rows, and a small one's says
  how many days its rows take;
- **the interval**: the relative WAPE change, (canary's absolute error - champion's) /
  champion's, with a paired bootstrap interval over store-days (`scipy.stats.bootstrap`,
  paired, BCa, a fixed seed), as the gate with evidence does: a store's day is one unit, both
  sides resampled together, so a day hard for both moves neither;
- **the outcome**: `not enough evidence` (fewer rows than the step needs, actual sales that
  sum to 0, fewer than two stores, no interval), `fail` (the interval's lower bound above the
  tolerance: worse by more than it, at the confidence), `pass` (its upper bound at most the
  tolerance: not worse by more than it), else `inconclusive`.

What an inconclusive step does (extend, then a final rule) is `analysis.py`'s to say.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import pandas as pd

from retrain_assets.features.evidence import NOT_ENOUGH
from retrain_assets.features.paired_change import paired_interval, relative_change
from retrain_assets.store.snapshots import SnapshotRecord

MIN_STORES = 2  # a bootstrap over one store's days says nothing about the others
RESAMPLES = 2000
VOLUME_DAYS = 7  # the newest published days the customer's rows a day are averaged over
PAIR_COLUMNS = ["store_id", "forecast_date", "actual", "canary", "champion"]

Outcome = Literal["pass", "fail", "inconclusive", "not enough evidence"]


@dataclass(frozen=True)
class StepVolume:
    """How many rows with actuals a step needs, from the customer's volume and the step's share."""

    rows_per_day: float  # the customer's rows with actuals a day (0: not known)
    weight: float  # the step's share of the traffic
    min_rows: int  # the floor
    min_days: float  # days of canary traffic the rows must cover

    @property
    def per_day(self) -> float:
        """Return the canary's expected rows with actuals a day."""
        return self.rows_per_day * self.weight

    @property
    def needed(self) -> int:
        """Return the rows the step needs before its interval is judged."""
        return max(self.min_rows, math.ceil(self.per_day * self.min_days))

    def describe(self) -> str:
        """Return the sample size and where it comes from, e.g. for a reason."""
        if self.per_day <= 0:
            return f"needs >= {self.needed} (the customer's rows a day are not known)"
        days = self.needed / self.per_day
        return (
            f"needs >= {self.needed} ({self.rows_per_day:.0f} rows with actuals a day x "
            f"{self.weight:.0%} = {self.per_day:.1f} a day: about {days:.1f} days)"
        )


@dataclass(frozen=True)
class CanaryEvidence:
    """The evidence's outcome, the rule that decided it and every number behind it."""

    outcome: Outcome
    rule: str  # "evidence" (not enough of it) or "interval"
    reason: str
    rows: int
    needed: int
    stores: int = 0
    store_days: int = 0
    change: float | None = None
    low: float | None = None
    high: float | None = None
    method: str = ""

    def as_metadata(self) -> dict[str, float | int | str]:
        """Return the numbers as JSON-able metadata (`rollout_analyses.evidence`)."""
        found: dict[str, float | int | str] = {
            "outcome": self.outcome,
            "rule": self.rule,
            "rows": self.rows,
            "rows_needed": self.needed,
            "stores": self.stores,
            "store_days": self.store_days,
        }
        for name in ("change", "low", "high"):
            value = getattr(self, name)
            if value is not None:
                found[f"wape_{name}" if name == "change" else f"interval_{name}"] = value
        if self.method:
            found["interval_method"] = self.method
        return found


def judge_canary(
    pairs: pd.DataFrame | None, volume: StepVolume, tolerance: float, confidence: float
) -> CanaryEvidence:
    """Judge the canary-routed rows with actuals (columns PAIR_COLUMNS; None: none read).

    Args:
        pairs: one row per request key: store, day, actual, canary's and champion's forecast.
        volume: the rows the step needs and where that number comes from.
        tolerance: how much worse (relative WAPE) the canary may be.
        confidence: the interval's confidence.
    """
    needed = volume.needed
    rows = 0 if pairs is None else len(pairs)
    if pairs is None or rows < needed:
        why = f"{NOT_ENOUGH}: {rows} rows with actuals, {volume.describe()}"
        return CanaryEvidence("not enough evidence", "evidence", why, rows, needed)
    units = store_days(pairs)
    stores = int(pairs["store_id"].astype(str).nunique())
    base = CanaryEvidence("not enough evidence", "evidence", "", rows, needed, stores, len(units))
    if units[:, 2].sum() <= 0:
        why = f"{NOT_ENOUGH}: the actual sales of {rows} rows sum to 0 (WAPE is undefined)"
        return replace(base, reason=why)
    if stores < MIN_STORES:
        why = (
            f"{NOT_ENOUGH}: {rows} rows from {stores} store; a bootstrap over one store's "
            f"{len(units)} days cannot speak for the others (needs >= {MIN_STORES} stores)"
        )
        return replace(base, reason=why)
    change = relative_change(units)
    bounds = paired_interval(units, confidence, RESAMPLES)
    if bounds is None:
        why = (
            f"{NOT_ENOUGH}: no bootstrap interval over {len(units)} store-days (the champion's "
            "absolute error sums to 0 in some resamples)"
        )
        return replace(base, reason=why)
    low, high, method = bounds
    canary_wape = units[:, 0].sum() / units[:, 2].sum()
    champion_wape = units[:, 1].sum() / units[:, 2].sum()
    numbers = (
        f"canary WAPE {canary_wape:.4f} vs champion {champion_wape:.4f}, change {change:+.1%} "
        f"({confidence:.0%} interval {low:+.1%} .. {high:+.1%}, paired bootstrap over "
        f"{len(units)} store-days of {stores} stores, {rows} rows; {volume.describe()})"
    )
    judged = replace(base, rule="interval", change=change, low=low, high=high, method=method)
    if low > tolerance:
        why = f"worse by more than {tolerance:.0%} (lower bound {low:+.1%}): {numbers}"
        return replace(judged, outcome="fail", reason=why)
    if high <= tolerance:
        why = f"not worse by more than {tolerance:.0%} (upper bound {high:+.1%}): {numbers}"
        return replace(judged, outcome="pass", reason=why)
    why = f"the interval straddles {tolerance:+.0%}: {numbers}"
    return replace(judged, outcome="inconclusive", reason=why)


def store_days(pairs: pd.DataFrame) -> np.ndarray:
    """Return one row per store-day: [canary's absolute error, champion's, |actual|] summed."""
    actual = pairs["actual"].to_numpy(dtype=float)
    frame = pd.DataFrame(
        {
            "store": pairs["store_id"].astype(str).to_numpy(),
            "day": pairs["forecast_date"].to_numpy(),
            "c": np.abs(actual - pairs["canary"].to_numpy(dtype=float)),
            "r": np.abs(actual - pairs["champion"].to_numpy(dtype=float)),
            "a": np.abs(actual),
        }
    )
    return frame.groupby(["store", "day"], sort=True)[["c", "r", "a"]].sum().to_numpy(dtype=float)


def daily_rows(
    snapshots: Mapping[dt.date, SnapshotRecord], customers: Iterable[str], days: int = VOLUME_DAYS
) -> dict[str, float]:
    """Return each customer's rows a day over the newest `days` published days (0: none known).

    From the feature snapshots' rows per customer: every row of a published day has its
    actual sales, so this is the customer's rows with actuals a day.
    """
    newest = [snapshots[day] for day in sorted(snapshots)[-days:]]
    if not newest:
        return {customer: 0.0 for customer in customers}
    return {
        customer: sum(r.rows_per_customer.get(customer, 0) for r in newest) / len(newest)
        for customer in customers
    }
