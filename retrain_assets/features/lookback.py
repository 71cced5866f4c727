"""Which sales days a feature day can use: its full look-back, a shorter one, or none.

The first feature days of a history look back past the first sales day: they are computed
from the days that exist (lags over missing days are NaN) and say so. A day missing anywhere
after the first sales day is different: it is a hole, and the feature day waits for it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass

from retrain_assets.features.feature_math import LOOKBACK

LOOKBACK_DAYS = LOOKBACK


@dataclass(frozen=True)
class Lookback:
    """What one feature day's look-back holds, or why the day cannot be computed."""

    day: dt.date
    history_days_available: int
    partial_history: bool
    problem: str | None = None


def _span(days: list[dt.date]) -> str:
    return f"{days[0]}" if len(days) == 1 else f"{len(days)} days, {days[0]} .. {days[-1]}"


def lookback(day: dt.date, sales_days: Collection[dt.date], first: dt.date | None) -> Lookback:
    """Return what `day`'s look-back holds, given the days `sales` has and its first day.

    Days before `first` are the start of history, not holes: the look-back is shorter and
    `partial_history` is set. A missing day from `first` on (the day itself or its look-back)
    is a problem naming the days to materialize.
    """
    if first is None:
        return Lookback(day, 0, True, "sales has no day materialized at all")
    if day < first:
        return Lookback(day, 0, True, f"{day} is before the first sales day {first}")
    start = day - dt.timedelta(days=LOOKBACK_DAYS)
    wanted = [start + dt.timedelta(days=i) for i in range(LOOKBACK_DAYS + 1)]
    missing = [d for d in wanted if d >= first and d not in sales_days]
    if day in missing:
        return Lookback(day, 0, start < first, f"sales has no data for {day} itself")
    if missing:
        return Lookback(
            day, 0, start < first, f"sales has no data for {_span(missing)} of its look-back"
        )
    available = sum(1 for d in wanted[:-1] if d in sales_days)
    return Lookback(day, available, start < first)
