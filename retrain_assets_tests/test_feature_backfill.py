"""A feature backfill launched as the UI launches one: it touches features and nothing else."""

import time

import pytest

from retrain_assets_tests.running_platform import RunningPlatform, running_platform

pytestmark = pytest.mark.system

FEATURE_ASSETS = {"sales", "store_day_features"}
LAUNCH = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
    ... on InvalidSubsetError { message }
    ... on UnauthorizedError { message }
  }
}
"""
BACKFILL = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill { status error { message } }
  }
}
"""
RUNS = """
{ runsOrError { ... on Runs { results { runId status assetSelection { path }
  tags { key value } } } } }
"""
GROUPS = "{ assetNodes { assetKey { path } groupName } }"
MATERIALIZATIONS = """
query Mats($partitions: [String!]) {
  assetNodeOrError(assetKey: {path: ["store_day_features"]}) {
    ... on AssetNode { assetMaterializations(partitions: $partitions) {
      partition runId tags { key value } } }
  }
}
"""


def launch_backfill(platform: RunningPlatform, assets: list[str], days: list[str]) -> str:
    """Launch a partition backfill through the webserver's GraphQL API; return its id."""
    params = {"assetSelection": [{"path": [a]} for a in assets], "partitionNames": days}
    result = platform.graphql(LAUNCH, {"params": params})["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result
    return result["backfillId"]


def wait_for_backfill(platform: RunningPlatform, backfill_id: str, seconds: float = 240) -> None:
    """Wait until the daemon has finished the backfill; fail on anything but success."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        backfill = platform.graphql(BACKFILL, {"id": backfill_id})["partitionBackfillOrError"]
        if backfill["status"] in ("COMPLETED_SUCCESS", "COMPLETED"):
            return
        assert backfill["status"] in ("REQUESTED",), backfill
        time.sleep(1)
    pytest.fail(f"backfill {backfill_id} still running after {seconds} s")


def wait_for_customers(platform: RunningPlatform, count: int, seconds: float = 90) -> None:
    """Wait until the customer_discovery sensor has added the seeded tenants as partitions."""
    deadline = time.monotonic() + seconds
    sql = "SELECT count(*) FROM dynamic_partitions WHERE partitions_def_name = 'customers'"
    while platform.query("dagster", sql)[0][0] < count:
        assert time.monotonic() < deadline, "customer_discovery never added the demo tenants"
        time.sleep(1)


def days(first: int, last: int, month: str) -> list[str]:
    """Return `month`-DD keys from `first` to `last` inclusive."""
    return [f"{month}-{d:02d}" for d in range(first, last + 1)]


def test_a_seven_day_feature_backfill_runs_only_features_and_records_new_versions(tmp_path):
    with running_platform(tmp_path) as platform:
        wait_for_customers(platform, 3)
        groups = {
            node["assetKey"]["path"][-1]: node["groupName"]
            for node in platform.graphql(GROUPS)["assetNodes"]
        }
        assert {name for name, group in groups.items() if group == "features"} == FEATURE_ASSETS

        # Sales first (the seeded history starts 2026-01-01), then a week of features, which
        # look back 28 days. Selecting both in one backfill would make Dagster map each sales
        # day forward onto the 28 feature days after it, so the week would grow by 28 days.
        history_days = days(1, 31, "2026-01") + days(1, 4, "2026-02")
        history = launch_backfill(platform, ["sales"], history_days)
        wait_for_backfill(platform, history)
        week = days(29, 31, "2026-01") + days(1, 4, "2026-02")
        backfill_id = launch_backfill(platform, ["store_day_features"], week)
        wait_for_backfill(platform, backfill_id)

        runs = platform.graphql(RUNS)["runsOrError"]["results"]
        assert runs and all(run["status"] == "SUCCESS" for run in runs)
        for run in runs:
            targeted = {key["path"][-1] for key in run["assetSelection"] or []}
            assert targeted <= FEATURE_ASSETS, run  # no run outside `features`, none at all
        backfill_runs = [
            r for r in runs if {"key": "dagster/backfill", "value": backfill_id} in r["tags"]
        ]
        assert len(backfill_runs) == 1  # BackfillPolicy.single_run: the week is one run

        mats = platform.graphql(MATERIALIZATIONS, {"partitions": week})["assetNodeOrError"]
        mats = mats["assetMaterializations"]
        versions = {
            m["partition"]: {t["key"]: t["value"] for t in m["tags"]}["dagster/data_version"]
            for m in mats
        }
        assert sorted(versions) == week and len(set(versions.values())) == 7
        snapshots = platform.query(
            "app",
            "SELECT partition_date::text, data_version, from_backfill, backfill_id "
            "FROM feature_snapshots ORDER BY partition_date",
        )
        assert [(d, v) for d, v, _, _ in snapshots] == sorted(versions.items())
        assert {(f, b) for _, _, f, b in snapshots} == {(True, backfill_id)}
        assert platform.stop() == 0
