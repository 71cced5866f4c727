"""`landing_arrivals` evaluated on a Postgres-backed instance; its requests run in process.

Each test plays the daemon by hand: evaluate the sensor with the cursor of the last tick,
execute the runs it requested, evaluate again.
"""

import datetime as dt
import os
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from retrain_assets.automation import landing_arrivals as sensor_module
from retrain_assets.automation.landing_arrivals import (
    AUTOMATION_TAG,
    NAME,
    TRIGGER_TAG,
    landing_arrivals,
)
from retrain_assets.customers import CUSTOMERS
from retrain_assets.definitions import FEATURES_JOB, build_definitions
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.store.snapshots import latest_snapshots

START = dt.date(2025, 3, 1)
TENANTS = (
    TenantSpec("alpha-us", "US", stores=2, items=3, seed=1),
    TenantSpec("beta-de", "DE", stores=1, items=2, seed=2),
)
RANGE = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")
FEATURE_SIDE = {"sales", "store_day_features"}


def day(offset: int) -> dt.date:
    return START + dt.timedelta(days=offset)


@pytest.fixture
def world(
    tmp_path: Path,
    app_db: str,
    dagster_instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
):
    """Ten landed days of two tenants, their partitions, a Postgres-backed Dagster instance."""
    landing = tmp_path / "landing"
    for spec in TENANTS:
        land_tenant(str(landing), spec, [day(i) for i in range(10)])
    monkeypatch.setenv("RETRAIN_LANDING_URL", str(landing))
    monkeypatch.setenv("RETRAIN_STORAGE_URL", str(tmp_path / "storage"))
    monkeypatch.setenv("RETRAIN_APP_PG_URL", app_db)
    monkeypatch.setenv("RETRAIN_LANDING_SETTLE_SECONDS", "0")
    instance = dagster_instance
    instance.add_dynamic_partitions(CUSTOMERS.name, [s.name for s in TENANTS])
    return {"instance": instance, "landing": landing, "db": app_db, "cursor": None}


def tick(world) -> dg.SensorResult:
    """Evaluate the sensor once with the last tick's cursor, and keep the new cursor."""
    context = dg.build_sensor_context(instance=world["instance"], cursor=world["cursor"])
    result = landing_arrivals(context)
    world["cursor"] = result.cursor or world["cursor"]
    return result


def reason(result: dg.SensorResult) -> str:
    return result.skip_reason.skip_message if result.skip_reason else ""


def run(world, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    """Execute a requested run as the daemon would launch it: its assets, its tags."""
    job = (
        build_definitions()
        .resolve_job_def(FEATURES_JOB)
        .get_subset(asset_selection=set(request.asset_selection))
    )
    return job.execute_in_process(instance=world["instance"], tags=request.tags)


def summary(request: dg.RunRequest) -> tuple:
    keys = {key.to_user_string() for key in request.asset_selection}
    return request.tags[RANGE[0]], request.tags[RANGE[1]], request.tags[TRIGGER_TAG], keys


def materialized(instance: dg.DagsterInstance, asset: str) -> dict[str, list[str]]:
    """Return partition -> run ids of every materialization of `asset`, oldest first."""
    records = instance.fetch_materializations(dg.AssetKey(asset), limit=10_000).records
    found: dict[str, list[str]] = {}
    for record in sorted(records, key=lambda r: r.storage_id):
        found.setdefault(record.asset_materialization.partition, []).append(record.run_id)
    return found


def test_landed_days_are_one_run_and_a_late_file_rereads_its_day_once(world):
    instance = world["instance"]
    first = tick(world)
    [request] = first.run_requests
    assert summary(request) == ("2025-03-01", "2025-03-10", "landing", FEATURE_SIDE)
    assert request.tags[AUTOMATION_TAG] == NAME
    again = landing_arrivals(dg.build_sensor_context(instance=instance, cursor=None))
    assert [r.run_key for r in again.run_requests] == [request.run_key]  # same tick, same key
    assert tick(world).run_requests == []  # requested: nothing new until it changes

    assert run(world, request).success
    assert sorted(latest_snapshots(world["db"])) == [day(i) for i in range(10)]
    quiet = tick(world)
    assert quiet.run_requests == [] and reason(quiet).startswith("no new or changed")
    versions = {d: s.data_version for d, s in latest_snapshots(world["db"]).items()}

    # A late, corrected file for a past day: that day is read again, alone.
    late = world["landing"] / "alpha-us" / f"{day(3)}.csv"
    frame = pd.read_csv(late)
    frame.loc[0, "units_sold"] += 5
    frame.to_csv(late, index=False)
    [reread] = tick(world).run_requests
    assert summary(reread) == ("2025-03-04", "2025-03-04", "landing", FEATURE_SIDE)
    assert run(world, reread).success
    # The feature days after it looked back on the old file: they follow, features only.
    [follow] = tick(world).run_requests
    assert summary(follow) == (
        "2025-03-05",
        "2025-03-10",
        "features_behind_sales",
        {"store_day_features"},
    )
    assert run(world, follow).success
    assert tick(world).run_requests == []

    sales_runs = materialized(instance, "sales")
    assert {d: len(r) for d, r in sales_runs.items()} == {
        str(day(i)): 2 if i == 3 else 1 for i in range(10)
    }
    feature_runs = materialized(instance, "store_day_features")
    assert {d: len(r) for d, r in feature_runs.items()} == {
        str(day(i)): 1 if i < 3 else 2 for i in range(10)
    }
    after = {d: s.data_version for d, s in latest_snapshots(world["db"]).items()}
    changed = sorted(d for d in after if after[d] != versions[d])
    # The days after it looked back on it, but none of their features reads a day 1 - 6 back
    # (issue 39: the rolling means end at lag 7), so only the day itself changed in 10 days.
    assert changed == [day(3)]


def test_a_new_day_waits_for_every_customer_until_its_cutoff(world, monkeypatch):
    assert run(world, tick(world).run_requests[0]).success
    new = day(10)
    land_tenant(str(world["landing"]), TENANTS[0], [new])
    before_cutoff = dt.datetime.combine(new, dt.time(23), tzinfo=dt.UTC)
    monkeypatch.setattr(sensor_module, "utc_now", lambda: before_cutoff)
    waiting = tick(world)
    assert waiting.run_requests == []
    assert (
        f"1 day(s) waiting: {new}: 1 of 2 customers delivered; waiting for beta-de until "
        f"the cut-off {new + dt.timedelta(days=1)} 12:00 UTC"
    ) in reason(waiting)

    land_tenant(str(world["landing"]), TENANTS[1], [new])
    [complete] = tick(world).run_requests
    assert summary(complete)[:3] == (str(new), str(new), "landing")
    assert run(world, complete).success

    other = day(11)  # past its cut-off, the day goes ahead with the files it has
    land_tenant(str(world["landing"]), TENANTS[0], [other])
    monkeypatch.setattr(sensor_module, "utc_now", lambda: dt.datetime.now(dt.UTC))
    [past] = tick(world).run_requests
    assert summary(past)[:3] == (str(other), str(other), "landing")


def test_a_file_still_being_written_waits_and_an_unfinished_run_holds_the_sensor(
    world, monkeypatch
):
    monkeypatch.setenv("RETRAIN_LANDING_SETTLE_SECONDS", "3600")
    fresh = tick(world)
    assert fresh.run_requests == [] and "files still arriving" in reason(fresh)
    for path in world["landing"].rglob("*.csv"):
        os.utime(path, (0, 0))  # an hour later, nothing changed
    [request] = tick(world).run_requests
    running = dg.DagsterRun(
        job_name="__ASSET_JOB",
        run_id="running-run",
        tags=request.tags,
        status=dg.DagsterRunStatus.STARTED,
    )
    world["instance"].add_run(running)
    land_tenant(str(world["landing"]), TENANTS[0], [day(10)])
    held = tick(world)
    assert held.run_requests == []
    assert reason(held).startswith("waiting for run running-run (2025-03-01 .. 2025-03-10)")


def test_the_automation_never_selects_or_conditions_anything_on_the_model_side():
    defs = build_definitions()
    sensor = defs.get_sensor_def(NAME)
    assert sensor.job_name == FEATURES_JOB
    job = defs.resolve_job_def(FEATURES_JOB)
    assert {key.to_user_string() for key in job.asset_layer.selected_asset_keys} == FEATURE_SIDE
    conditioned = [
        spec.key for spec in defs.resolve_all_asset_specs() if spec.automation_condition is not None
    ]
    assert conditioned == []  # no declarative automation anywhere, least of all models
    graph = defs.resolve_asset_graph()
    assert graph.get(dg.AssetKey("store_day_features")).child_keys == set()
