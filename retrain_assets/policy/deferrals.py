"""Customers whose data stopped: the policy's deferral, recorded until their rows arrive again.

A customer that stops delivering files while the others go on must be visible, and must not be
scheduled on a window that holds none of its rows (issue 31). The rule says so (`rule.py`,
kind "no data"); the sensor records it here, one row per customer with since when no rows of
its arrived, and removes it once the customer's outcome is anything else. `retrain-assets
status` prints these rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from retrain_assets.store.database import transaction


@dataclass(frozen=True)
class Deferral:
    """A customer the policy does not schedule, and why."""

    customer: str
    reason: str
    no_data_since: dt.date | None  # its newest day with rows (None: none published at all)
    published_up_to: dt.date
    first_deferred_at: dt.datetime
    last_deferred_at: dt.datetime


def record_deferral(
    url: str, customer: str, reason: str, since: dt.date | None, published_up_to: dt.date
) -> None:
    """Record (or refresh) the customer's deferral; the first time it was deferred is kept."""
    with transaction(url) as cur:
        cur.execute(
            "INSERT INTO retraining_deferrals (customer, reason, no_data_since, published_up_to)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (customer) DO UPDATE SET"
            " reason = excluded.reason, no_data_since = excluded.no_data_since,"
            " published_up_to = excluded.published_up_to, last_deferred_at = clock_timestamp()",
            (customer, reason, since, published_up_to),
        )


def clear_deferrals(url: str, customers: Sequence[str]) -> int:
    """Remove the deferrals of these customers (their rows arrived); return how many went."""
    if not customers:
        return 0
    with transaction(url) as cur:
        cur.execute("DELETE FROM retraining_deferrals WHERE customer = ANY(%s)", (list(customers),))
        return int(cur.rowcount)


def deferrals(url: str, customer: str | None = None) -> list[Deferral]:
    """Return the recorded deferrals (one customer's, if named), by customer."""
    with transaction(url) as cur:
        cur.execute(
            "SELECT customer, reason, no_data_since, published_up_to, first_deferred_at,"
            " last_deferred_at FROM retraining_deferrals"
            " WHERE %s::text IS NULL OR customer = %s ORDER BY customer",
            (customer, customer),
        )
        return [Deferral(*row) for row in cur.fetchall()]


def deferral_lines(url: str, customer: str | None = None) -> list[str]:
    """Return what `status` prints for each deferred customer."""
    return [
        f"{d.customer:<20} policy    deferred since {d.first_deferred_at:%Y-%m-%d %H:%M} UTC:"
        f" {d.reason}"
        for d in deferrals(url, customer)
    ]
