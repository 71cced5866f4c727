"""One platform for the whole chaos suite, on a Postgres of its own that the suite may kill.

`retrain-assets up --no-demo` with RETRAIN_PG_URL pointing at a server started here in a temp
folder (never the session's embedded server, never the system's), one GPU slot (so a second
job waits in the queue), short poller and rollout intervals. Every customer of the suite is
landed and published once, up front, and the two rollout customers are put in CANARY_10 (their
deploy runs side by side); each test steers its own customers to a wait point.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator

import pytest

from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets_tests.chaos.steering import canaries
from retrain_assets_tests.chaos.world import (
    CHAOS_ENV,
    FIRST_FEATURE_DAY,
    LAST,
    ROLES,
    START,
    ChaosWorld,
)
from retrain_assets_tests.gpu.restartable_postgres import restartable_postgres
from retrain_assets_tests.support.platform import RunningPlatform, running_platform
from retrain_assets_tests.support.ui_actions import publish_days
from retrain_assets_tests.support.waiting import wait_until


def _wait_for_partitions(platform: RunningPlatform, names: list[str]) -> None:
    sql = "SELECT count(*) FROM dynamic_partitions WHERE partition = ANY(%s)"
    wait_until(
        lambda: platform.query("dagster", sql, (names,))[0][0] == len(names),
        90,
        "customer_discovery adding the chaos customers",
    )


@pytest.fixture(scope="package")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosWorld]:
    """Start the chaos platform, land and publish every role's customer, open two canaries."""
    with restartable_postgres() as postgres:
        env = {**CHAOS_ENV, "RETRAIN_PG_URL": postgres.url}
        home = tmp_path_factory.mktemp("chaos-platform")
        with running_platform(home, env=env, args=("--no-demo",)) as platform:
            suffix = uuid.uuid4().hex[:6]
            specs = {
                role: TenantSpec(f"chaos-{role}-{suffix}", "US", stores=s, items=i, seed=60 + n)
                for n, (role, (s, i)) in enumerate(ROLES.items())
            }
            days = [START + dt.timedelta(days=i) for i in range((LAST - START).days + 1)]
            for spec in specs.values():
                land_tenant(str(platform.home / "landing"), spec, days)
            _wait_for_partitions(platform, sorted(spec.name for spec in specs.values()))
            publish_days(platform, "sales", START.isoformat(), LAST.isoformat())
            publish_days(
                platform, "store_day_features", FIRST_FEATURE_DAY.isoformat(), LAST.isoformat()
            )
            world = ChaosWorld(platform, postgres, specs)
            canaries(world, ["r10", "r50"])
            yield world
