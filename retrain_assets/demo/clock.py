"""The live demo's clock: a new simulated day lands for every demo tenant every few seconds.

`up` starts it (as the `demo-clock` process) when it landed the demo tenants itself, so a
newcomer sees the loop turn without doing anything: days land, features follow, the policy
decides, models train, gate, register and roll out. It never lands a day after yesterday
(daily partitions exist for finished days only): once it catches up it waits for tomorrow.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from retrain_assets.demo.roster import demo_tenants
from retrain_assets.demo.simulate import land_tenant, landed_days
from retrain_assets.demo.tenants import TenantSpec

Say = Callable[[str], None]
BeforeLanding = Callable[[TenantSpec, dt.date], None]
Hold = Callable[[], str | None]  # None: land the next day now; else why the clock waits


def next_days(
    landing_root: str, latest_allowed: dt.date, tenants: tuple[TenantSpec, ...] | None = None
) -> list[tuple[TenantSpec, dt.date]]:
    """Return each tenant's next day to land, for the tenants that have not caught up.

    `tenants` defaults to the demo's (`demo_tenants()`: RETRAIN_DEMO_SCENARIO_SEED decides).
    """
    due = []
    for spec in demo_tenants() if tenants is None else tenants:
        landed = landed_days(landing_root, spec.name)
        if landed and landed[-1] < latest_allowed:
            due.append((spec, landed[-1] + dt.timedelta(days=1)))
    return due


def tick(
    landing_root: str,
    latest_allowed: dt.date,
    before_landing: BeforeLanding | None = None,
    tenants: tuple[TenantSpec, ...] | None = None,
) -> list[tuple[str, dt.date]]:
    """Land the next day of every demo tenant that has one due; return what landed.

    `before_landing` runs first for each (tenant, day): the demo asks the prediction service for
    that day's forecasts there, so the actuals that land next can judge them.
    """
    landed = []
    for spec, day in next_days(landing_root, latest_allowed, tenants):
        if before_landing is not None:
            before_landing(spec, day)
        land_tenant(landing_root, spec, [day])
        landed.append((spec.name, day))
    return landed


def run_clock(
    landing_root: str,
    seconds: float,
    stop: Callable[[], bool],
    say: Say,
    before_landing: BeforeLanding | None = None,
    hold: Hold | None = None,
    tenants: tuple[TenantSpec, ...] | None = None,
) -> None:
    """Land a day per tenant every `seconds` until `stop()` is true.

    While `hold()` gives a reason (the platform has not published what landed, see
    demo/pacing.py) the clock lands nothing, says the reason once, and looks again each second.
    `tenants` defaults to the demo's, read once when the clock starts.

    Raises:
        ValueError: `seconds` is not positive.
    """
    if seconds <= 0:
        raise ValueError(f"the demo clock needs a positive interval, not {seconds}")
    chosen = demo_tenants() if tenants is None else tenants
    said = None
    while not stop():
        waiting = hold() if hold is not None else None
        if waiting:
            if waiting != said:
                say(waiting)
            said = waiting
            time.sleep(min(1.0, seconds))
            continue
        said = None
        started = time.monotonic()
        yesterday = dt.date.today() - dt.timedelta(days=1)
        landed = tick(landing_root, yesterday, before_landing, chosen)
        if landed:
            say(", ".join(f"{name} {day}" for name, day in landed))
        while not stop() and time.monotonic() - started < seconds:
            time.sleep(min(0.5, seconds))
