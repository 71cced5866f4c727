"""The demo clock keeps pace with the platform: it never runs far ahead of the published days.

The demo's story is told in simulated days (a price cut on day 1, a festival until day 13):
a challenger shows a change only if it trained on the days that carry it. On a loaded
machine the platform may publish a day more slowly than the clock lands one; a clock that
raced ahead would land the whole festival before the first model trained and tell another
story. So the clock waits while the newest published feature day is more than a few days
behind what it has landed (on a quiet machine it never waits after the history is published).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import psycopg2

from retrain_assets.demo.roster import demo_tenants
from retrain_assets.demo.simulate import landed_days
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.store.database import one_row, transaction

AHEAD_DAYS = 3  # how far the landed days may run ahead of the published ones


def newest_published(url: str) -> dt.date | None:
    """Return the newest day of `store_day_features` the platform has published, if any."""
    with transaction(url) as cur:
        cur.execute("SELECT max(partition_date) FROM feature_snapshots")
        return one_row(cur)[0]


def pace(
    url: str,
    landing_root: str,
    tenants: tuple[TenantSpec, ...] | None = None,
    ahead_days: int = AHEAD_DAYS,
) -> Callable[[], str | None]:
    """Return the clock's hold: None when it may land a day, else why it waits.

    `tenants` defaults to the demo's (`demo_tenants()`), read once here.
    """
    chosen = demo_tenants() if tenants is None else tenants

    def hold() -> str | None:
        latest = [days[-1] for spec in chosen if (days := landed_days(landing_root, spec.name))]
        if not latest:
            return None
        landed = min(latest)
        try:
            published = newest_published(url)
        except psycopg2.Error as err:
            return f"waiting: cannot read the published days ({str(err).strip()[:200]})"
        if published is None or (landed - published).days > ahead_days:
            return (
                f"waiting for the platform: days landed up to {landed}, features published up "
                f"to {published or 'no day yet'} (the clock stays within {ahead_days} days)"
            )
        return None

    return hold
