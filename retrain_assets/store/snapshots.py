"""Feature snapshot records: what the model side reads to choose training data.

One row per published feature partition. A republished day (a backfill, a late fix) is a new
row with `from_backfill` set, so the retraining policy can tell new data from rewritten data.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from psycopg2.extras import Json

from retrain_assets.store.database import one_row, transaction


@dataclass(frozen=True)
class SnapshotRecord:
    """One published feature partition."""

    partition_date: dt.date
    data_version: str
    feature_version: str
    rows_per_customer: dict[str, int]
    from_backfill: bool
    backfill_id: str | None
    run_id: str


_INSERT = """
    INSERT INTO feature_snapshots (partition_date, data_version, feature_version,
        rows_per_customer, from_backfill, backfill_id, run_id)
    VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id
"""


def _values(record: SnapshotRecord) -> tuple:
    return (
        record.partition_date,
        record.data_version,
        record.feature_version,
        Json(record.rows_per_customer),
        record.from_backfill,
        record.backfill_id,
        record.run_id,
    )


def publish_snapshot(url: str, record: SnapshotRecord) -> int:
    """Append a snapshot record and return its id."""
    return publish_snapshots(url, [record])[0]


def publish_snapshots(url: str, records: Sequence[SnapshotRecord]) -> list[int]:
    """Append the records of one run in one transaction; return their ids in order.

    A reader (the retraining policy) sees all of a run's days or none of them, never the
    first 77 of 120 while the run is still writing.
    """
    ids: list[int] = []
    with transaction(url) as cur:
        for record in records:
            cur.execute(_INSERT, _values(record))
            ids.append(int(one_row(cur)[0]))
    return ids


def latest_snapshots(url: str) -> dict[dt.date, SnapshotRecord]:
    """Return the latest published record of every day."""
    with transaction(url) as cur:
        cur.execute(
            """
            SELECT DISTINCT ON (partition_date) partition_date, data_version, feature_version,
                rows_per_customer, from_backfill, backfill_id, run_id
            FROM feature_snapshots ORDER BY partition_date, published_at DESC, id DESC
            """
        )
        return {row[0]: SnapshotRecord(*row) for row in cur.fetchall()}
