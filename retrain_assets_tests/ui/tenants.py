"""Small tenants landed into the shared platform, one per journey, and their feature days.

Every journey lands the same days (so no day's sales file is missing for any of them) and
publishes what it needs itself; tenants are uniquely named, so a journey reads only its own
customers' runs, checks and verdicts even though the platform is shared.
"""

from __future__ import annotations

import datetime as dt
import uuid

from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.lookback import LOOKBACK_DAYS
from retrain_assets_tests.support.platform import RunningPlatform
from retrain_assets_tests.support.waiting import wait_until

FIRST_LANDED = dt.date(2026, 10, 1)
FEATURE_DAYS = 21  # published feature days: three weeks to train and judge on
LANDED_DAYS = LOOKBACK_DAYS + FEATURE_DAYS
# the first day with its whole look-back of sales before it, and the last landed day
FIRST_FEATURE_DAY = (FIRST_LANDED + dt.timedelta(days=LOOKBACK_DAYS)).isoformat()
LAST_DAY = (FIRST_LANDED + dt.timedelta(days=LANDED_DAYS - 1)).isoformat()


def land(platform: RunningPlatform, purpose: str) -> str:
    """Land a new 2-store, 4-item tenant and wait until it is a `customers` partition."""
    [name] = land_many(platform, purpose)
    return name


def land_many(platform: RunningPlatform, *purposes: str) -> list[str]:
    """Land a tenant per purpose, then wait once until all are `customers` partitions.

    customer_discovery ticks every 15 s: tenants landed together are found by one tick.
    """
    names = [f"ui-{purpose}-{uuid.uuid4().hex[:6]}" for purpose in purposes]
    days = [FIRST_LANDED + dt.timedelta(days=i) for i in range(LANDED_DAYS)]
    for name in names:
        land_tenant(str(platform.home / "landing"), TenantSpec(name, "US", 2, 4, seed=5), days)
    sql = (
        "SELECT count(*) FROM dynamic_partitions "
        "WHERE partitions_def_name = 'customers' AND partition = ANY(%s)"
    )
    wait_until(
        lambda: platform.query("dagster", sql, (names,))[0][0] == len(names),
        90,
        f"customer_discovery adding {', '.join(names)}",
    )
    return names
