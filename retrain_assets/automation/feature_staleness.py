"""Feature days behind their sales: never computed, or computed before a day they look back on.

A late file re-materializes one day of `sales`; the 34 feature days after it looked back on
the old content (lags, rolling means), so they are behind too and are computed again. The
order of Dagster's materialization events (storage ids) says what came first.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from retrain_assets.features.lookback import LOOKBACK_DAYS


def _window(day: dt.date) -> list[dt.date]:
    return [day - dt.timedelta(days=i) for i in range(LOOKBACK_DAYS + 1)]


def lookback_storage_ids(sales_ids: Mapping[dt.date, int], day: dt.date) -> list[int]:
    """Return the storage ids of the sales days in `day`'s look-back (the day included)."""
    return [sales_ids[d] for d in _window(day) if d in sales_ids]


def stale_feature_days(
    sales_ids: Mapping[dt.date, int], feature_ids: Mapping[dt.date, int]
) -> list[dt.date]:
    """Return the sales days whose features are missing or older than a sales day they use."""
    stale = []
    for day in sorted(sales_ids):
        computed = feature_ids.get(day)
        if computed is None or computed < max(lookback_storage_ids(sales_ids, day)):
            stale.append(day)
    return stale


def follow_up_days(stale: Iterable[dt.date], being_read: Iterable[dt.date]) -> list[dt.date]:
    """Return the stale days whose look-back no sales day read this tick touches.

    The others wait one tick: the run that reads the sales day would make them stale again.
    """
    reading = set(being_read)
    return [day for day in sorted(stale) if not reading.intersection(_window(day))]
