"""What the published snapshots say about one customer: history, new rows, the window to train.

Everything here reads the latest record of each day (`latest_snapshots`). New data is counted
per day after the last decision's window, so a republished day (a backfill, a late fix) is
never new: an old day is inside the window already, and a new day counts once however often
it is republished. A day dated up to the window's end is history even when it is published
for the first time after the decision (earlier history backfilled, a gap filled). That a
window ends where the history does is the sensor's part: it decides only on settled data
(`settled.py`), never half-way through a backfill.
"""

from __future__ import annotations

import datetime as dt

from retrain_assets.store.snapshot_ref import SnapshotRef
from retrain_assets.store.snapshots import SnapshotRecord

Published = dict[dt.date, SnapshotRecord]


def history_days(published: Published, customer: str) -> int:
    """Return how many published days have rows for the customer."""
    return sum(1 for r in published.values() if r.rows_per_customer.get(customer, 0) > 0)


def new_rows(published: Published, customer: str, after: dt.date) -> tuple[int, int]:
    """Return (rows, days) of the customer's data published for days after `after`."""
    counts = [r.rows_per_customer.get(customer, 0) for day, r in published.items() if day > after]
    return sum(counts), sum(1 for c in counts if c > 0)


def days_after(published: Published, after: dt.date, limit: int) -> list[dt.date]:
    """Return the latest `limit` published days after `after`, oldest first."""
    return sorted(day for day in published if day > after)[-limit:]


def choose_window(published: Published, window_days: int) -> SnapshotRef:
    """Return the training snapshot: the unbroken run of published days ending at the latest.

    At most `window_days` long; a gap in what is published ends the window there, because a
    snapshot with a missing day could never be trained on.

    Raises:
        ValueError: nothing is published.
    """
    if not published:
        raise ValueError("no feature snapshot is published yet: materialize store_day_features")
    last = max(published)
    first = last
    while (last - first).days + 1 < window_days and first - dt.timedelta(days=1) in published:
        first -= dt.timedelta(days=1)
    days = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    return SnapshotRef(first, last, {d.isoformat(): published[d].data_version for d in days})
