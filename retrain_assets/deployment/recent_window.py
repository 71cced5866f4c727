"""Which days the deploy-time check re-scores on: the newest days with the customer's actuals.

Newer than the candidate's holdout where such days exist (neither model has seen them, and
they are what the canary will be judged against); otherwise the newest days there are, which
then overlap the holdout. The choice is said in one sentence next to the verdict.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pandas as pd

from retrain_assets.asset_keys import STORE_DAY_FEATURES, name_of
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.training_export import LABEL, read_holdout
from retrain_assets.store.snapshots import latest_snapshots


@dataclass(frozen=True)
class ScoringWindow:
    """The days to score on and why these."""

    days: list[dt.date]
    note: str

    @property
    def span(self) -> str:
        """Return `first .. last`."""
        return f"{self.days[0]} .. {self.days[-1]}" if self.days else "no day"


def holdout_end(store: ParquetPartitionStore, customer: str, run_key: str) -> dt.date | None:
    """Return the last day of the run key's holdout, None if it was not exported here."""
    try:
        holdout = read_holdout(store, customer, run_key)
    except FileNotFoundError:
        return None
    return None if holdout.empty else pd.Timestamp(holdout["date"].max()).date()


def recent_window(
    url: str, store: ParquetPartitionStore, customer: str, run_key: str, days: int
) -> ScoringWindow:
    """Return the `days` newest published days with rows of the customer, preferring new ones.

    Raises:
        LookupError: no published day has rows of the customer.
    """
    published = latest_snapshots(url)
    with_rows = sorted(d for d, r in published.items() if r.rows_per_customer.get(customer))
    if not with_rows:
        raise LookupError(f"no published store_day_features day has rows of {customer}")
    return choose_days(with_rows, holdout_end(store, customer, run_key), days, run_key)


def choose_days(
    with_rows: list[dt.date], end: dt.date | None, days: int, run_key: str
) -> ScoringWindow:
    """Return the `days` newest of `with_rows` (sorted), only those after `end` if any are.

    `end`: the last day of the candidate's holdout (None: not known here). The decision
    benchmark calls this too, with the days it published.
    """
    newer = [d for d in with_rows if end is not None and d > end]
    if newer:
        chosen = newer[-days:]
        return ScoringWindow(
            chosen, f"{len(chosen)} newest day(s) with actuals after the holdout ending {end}"
        )
    chosen = with_rows[-days:]
    why = (
        f"no day with actuals after the holdout ending {end} yet"
        if end is not None
        else f"the holdout of run {run_key} is not known here"
    )
    return ScoringWindow(chosen, f"{why}: the {len(chosen)} newest day(s) with actuals")


def window_rows(store: ParquetPartitionStore, customer: str, window: ScoringWindow) -> pd.DataFrame:
    """Return the customer's `store_day_features` rows of the window that have actual sales."""
    frame = store.read(name_of(STORE_DAY_FEATURES), [d.isoformat() for d in window.days])
    frame = frame[frame["customer"] == customer]
    return frame[frame[LABEL].notna()].reset_index(drop=True)
