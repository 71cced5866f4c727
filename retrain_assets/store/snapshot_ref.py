"""Which feature snapshot a training run reads: a day range and each day's data version.

Whoever decides to train names the range; the data versions pin the content. A day that was
republished with different content since the decision makes the run refuse, rather than
silently train on data nobody decided on.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass

from retrain_assets.store.snapshots import latest_snapshots


class SnapshotUnavailable(ValueError):
    """The requested days are not all published, or changed since they were chosen."""


@dataclass(frozen=True)
class SnapshotRef:
    """A closed day range and the data version of every day in it."""

    first_day: dt.date
    last_day: dt.date
    data_versions: dict[str, str]

    def sha_for(self, customer: str) -> str:
        """Return the hash of one customer's rows in the range: the run key's snapshot input.

        A day's data version covers every customer's rows of that day, so the customer is part
        of the hash: two customers trained on the same days must never share a run key (they
        would share a GPU job and a candidate).
        """
        canonical = json.dumps(
            [customer, sorted(self.data_versions.items())], separators=(",", ":")
        )
        return hashlib.sha256(canonical.encode()).hexdigest()

    def as_metadata(self, customer: str) -> dict[str, object]:
        """Return the reference as JSON-able metadata (lineage without a dependency edge)."""
        return {
            "first_day": self.first_day.isoformat(),
            "last_day": self.last_day.isoformat(),
            "snapshot_sha": self.sha_for(customer),
            "data_versions": self.data_versions,
        }


def resolve_snapshot(
    db_url: str,
    first_day: dt.date | None,
    last_day: dt.date | None,
    expected: dict[str, str] | None,
    default_window_days: int,
) -> SnapshotRef:
    """Return the published snapshot for a range (default: the latest `default_window_days`).

    Raises:
        SnapshotUnavailable: a day is missing, or differs from `expected`.
    """
    published = latest_snapshots(db_url)
    if not published:
        raise SnapshotUnavailable("no feature snapshot is published yet: materialize features")
    last = last_day or max(published)
    first = first_day or last - dt.timedelta(days=default_window_days - 1)
    if first > last:
        raise SnapshotUnavailable(f"first day {first} is after last day {last}")
    days = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    missing = [d for d in days if d not in published]
    if missing:
        raise SnapshotUnavailable(
            f"{len(missing)} day(s) of store_day_features are not published "
            f"({missing[0]} .. {missing[-1]}; published: {min(published)} .. {max(published)}); "
            "materialize them first"
        )
    versions = {d.isoformat(): published[d].data_version for d in days}
    if expected:
        changed = sorted(d for d, v in expected.items() if versions.get(d) != v)
        if changed:
            raise SnapshotUnavailable(
                f"{len(changed)} day(s) changed since the decision chose them "
                f"(first: {changed[0]}); decide again on the current snapshot"
            )
    return SnapshotRef(first, last, versions)
