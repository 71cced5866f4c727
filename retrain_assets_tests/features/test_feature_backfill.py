"""A feature backfill launched as the UI launches one: it touches features and nothing else.

On the session's shared platform (no platform of its own to start): a tenant of this test,
uniquely named and landed on days no other test uses, so its days, runs and snapshots are its
own while other tests' customers live on the same platform.
"""

import datetime as dt
import time
import uuid

import pytest

from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets_tests.support.ui_actions import (
    days,
    launch_backfill,
    launch_days,
    wait_for_backfill_run,
    wait_for_run,
)
from retrain_assets_tests.support.waiting import wait_until

pytestmark = pytest.mark.system

FEATURE_ASSETS = {"sales", "store_day_features"}
FIRST_LANDED, LAST_LANDED = dt.date(2025, 6, 1), dt.date(2025, 7, 5)  # days of this test only
GROUPS = "{ assetNodes { assetKey { path } groupName } }"
MATERIALIZATIONS = """
query Mats($partitions: [String!]) {
  assetNodeOrError(assetKey: {path: ["store_day_features"]}) {
    ... on AssetNode { assetMaterializations(partitions: $partitions) {
      partition runId tags { key value } } }
  }
}
"""
RUNS_SINCE = """
query Runs($since: Float!) {
  runsOrError(filter: {createdAfter: $since}) { ... on Runs { results {
    runId status assetSelection { path } tags { key value } } } }
}
"""
CUSTOMER_TAGS = ("dagster/partition", "customer")


def land(platform) -> str:
    """Land this test's tenant (2 stores, 3 items) and wait until it is a customer partition."""
    name = f"backfill-{uuid.uuid4().hex[:6]}"
    landed = [
        FIRST_LANDED + dt.timedelta(days=i) for i in range((LAST_LANDED - FIRST_LANDED).days + 1)
    ]
    spec = TenantSpec(name, "US", stores=2, items=3, seed=9)
    land_tenant(str(platform.home / "landing"), spec, landed)
    sql = "SELECT count(*) FROM dynamic_partitions WHERE partition = %s"
    wait_until(
        lambda: platform.query("dagster", sql, (name,))[0][0] == 1,
        90,
        f"customer_discovery adding {name}",
    )
    return name


def test_a_seven_day_feature_backfill_runs_only_features_and_records_new_versions(
    shared_platform,
):
    platform = shared_platform
    customer = land(platform)
    launched_at = time.time()
    groups = {
        node["assetKey"]["path"][-1]: node["groupName"]
        for node in platform.graphql(GROUPS)["assetNodes"]
    }
    assert {name for name, group in groups.items() if group == "features"} == FEATURE_ASSETS

    # Sales first, in one run over the day range, then a week of features, which look back 28
    # days. Selecting both in one backfill would make Dagster map each sales day forward onto
    # the 28 feature days after it, so the week would grow by 28 days.
    sales_run = launch_days(platform, "sales", FIRST_LANDED.isoformat(), LAST_LANDED.isoformat())
    wait_for_run(platform, sales_run)
    week = days(29, 30, "2025-06") + days(1, 5, "2025-07")
    backfill_id = launch_backfill(platform, ["store_day_features"], week)
    [backfill_run] = wait_for_backfill_run(platform, backfill_id)  # single_run: one run
    wait_for_run(platform, backfill_run)

    # Every run since this test began: its own two are feature runs that succeeded, and no
    # run touched anything but features for its customer (other tests' customers may have
    # runs of their own on the shared platform).
    runs = platform.graphql(RUNS_SINCE, {"since": launched_at})["runsOrError"]["results"]
    mine = {run["runId"]: run for run in runs if run["runId"] in (sales_run, backfill_run)}
    assert sorted(mine) == sorted([sales_run, backfill_run])
    for run in runs:
        targeted = {key["path"][-1] for key in run["assetSelection"] or []}
        tags = {tag["key"]: tag["value"] for tag in run["tags"]}
        if run["runId"] in mine:
            assert run["status"] == "SUCCESS" and targeted <= FEATURE_ASSETS, run
        else:
            assert customer not in {tags.get(key) for key in CUSTOMER_TAGS}, run
    assert [
        r["runId"] for r in runs if {"key": "dagster/backfill", "value": backfill_id} in r["tags"]
    ] == [backfill_run]

    mats = platform.graphql(MATERIALIZATIONS, {"partitions": week})["assetNodeOrError"]
    mats = mats["assetMaterializations"]
    assert {m["runId"] for m in mats} == {backfill_run}
    versions = {
        m["partition"]: {t["key"]: t["value"] for t in m["tags"]}["dagster/data_version"]
        for m in mats
    }
    assert sorted(versions) == week and len(set(versions.values())) == 7
    snapshots = platform.query(
        "app",
        "SELECT partition_date::text, data_version, from_backfill, backfill_id "
        "FROM feature_snapshots WHERE partition_date BETWEEN %s AND %s ORDER BY partition_date",
        (FIRST_LANDED, LAST_LANDED),
    )
    assert [(d, v) for d, v, _, _ in snapshots] == sorted(versions.items())
    assert {(f, b) for _, _, f, b in snapshots} == {(True, backfill_id)}
    decided = platform.query(
        "app", "SELECT count(*) FROM retraining_decisions WHERE customer = %s", (customer,)
    )
    assert decided == [(0,)]
