"""Land the demo tenants' history: shared by `retrain-assets simulate` and the first `up`.

One function for both, so a freshly started platform holds exactly the history `simulate`
would have landed.
"""

from __future__ import annotations

import datetime as dt

from retrain_assets.demo.roster import demo_tenants
from retrain_assets.demo.simulate import days_to_land, land_tenant, landed_days
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.landing import customer_folders


def land_demo_tenants(
    landing_root: str,
    days: int | None = None,
    start: dt.date | None = None,
    latest_allowed: dt.date | None = None,
    tenants: tuple[TenantSpec, ...] | None = None,
) -> list[tuple[TenantSpec, list[dt.date]]]:
    """Land the next days of every demo tenant; return the days each one got.

    `tenants` defaults to the demo's (`demo_tenants()`: RETRAIN_DEMO_SCENARIO_SEED decides).

    Every tenant's days are planned before any file is written, so a refused request writes
    nothing. `latest_allowed` defaults to yesterday: daily partitions exist for finished days.

    Raises:
        ValueError: a tenant's days are refused (see `days_to_land`).
    """
    latest = latest_allowed or dt.date.today() - dt.timedelta(days=1)
    plan = [
        (spec, days_to_land(landed_days(landing_root, spec.name), days, start, latest))
        for spec in (demo_tenants() if tenants is None else tenants)
    ]
    for spec, planned in plan:
        land_tenant(landing_root, spec, planned)
    return plan


def seed_if_empty(landing_root: str) -> list[tuple[TenantSpec, list[dt.date]]]:
    """Land the default demo history when the landing zone has no customer yet; else nothing.

    A zone with any customer folder belongs to someone (a previous start, a real tenant), so
    `up` never adds demo tenants to it behind their back.
    """
    if customer_folders(landing_root):
        return []
    return land_demo_tenants(landing_root)
