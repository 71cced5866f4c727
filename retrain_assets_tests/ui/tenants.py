"""Small tenants landed into the shared platform, one per journey, and their feature days.

Every journey lands the same 49 days (so no day's sales file is missing for any of them) and
publishes what it needs itself; tenants are uniquely named, so a journey reads only its own
customers' runs, checks and verdicts even though the platform is shared.
"""

from __future__ import annotations

import datetime as dt
import uuid

from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets_tests.support.platform import RunningPlatform
from retrain_assets_tests.support.waiting import wait_until

FIRST_LANDED = dt.date(2026, 10, 1)
LANDED_DAYS = 49  # through 2026-11-18
FIRST_FEATURE_DAY = "2026-10-29"  # the first day with 28 days of sales before it
LAST_DAY = "2026-11-18"


def land(platform: RunningPlatform, purpose: str) -> str:
    """Land a new 2-store, 4-item tenant and wait until it is a `customers` partition."""
    name = f"ui-{purpose}-{uuid.uuid4().hex[:6]}"
    spec = TenantSpec(name, "US", stores=2, items=4, seed=5)
    days = [FIRST_LANDED + dt.timedelta(days=i) for i in range(LANDED_DAYS)]
    land_tenant(str(platform.home / "landing"), spec, days)
    sql = (
        "SELECT count(*) FROM dynamic_partitions "
        "WHERE partitions_def_name = 'customers' AND partition = %s"
    )
    wait_until(
        lambda: platform.query("dagster", sql, (name,))[0][0] == 1,
        90,
        f"customer_discovery adding {name}",
    )
    return name
