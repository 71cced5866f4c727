"""A feature backfill launched as the UI launches one: it touches features and nothing else."""

import pytest

from retrain_assets_tests.support.platform import running_platform
from retrain_assets_tests.support.ui_actions import (
    RUNS,
    days,
    launch_backfill,
    publish_days,
    wait_for_backfill_run,
    wait_for_customers,
    wait_for_run,
)

pytestmark = pytest.mark.system

FEATURE_ASSETS = {"sales", "store_day_features"}
GROUPS = "{ assetNodes { assetKey { path } groupName } }"
MATERIALIZATIONS = """
query Mats($partitions: [String!]) {
  assetNodeOrError(assetKey: {path: ["store_day_features"]}) {
    ... on AssetNode { assetMaterializations(partitions: $partitions) {
      partition runId tags { key value } } }
  }
}
"""


def test_a_seven_day_feature_backfill_runs_only_features_and_records_new_versions(tmp_path):
    # The landing automation is off: this test publishes sales and features as a person does.
    with running_platform(tmp_path, env={"RETRAIN_LANDING_AUTOMATION": "off"}) as platform:
        wait_for_customers(platform, 3)
        groups = {
            node["assetKey"]["path"][-1]: node["groupName"]
            for node in platform.graphql(GROUPS)["assetNodes"]
        }
        assert {name for name, group in groups.items() if group == "features"} == FEATURE_ASSETS

        # Sales first (the seeded history starts 2026-01-01), in one run over the day range,
        # then a week of features, which look back 28 days. Selecting both in one backfill
        # would make Dagster map each sales day forward onto the 28 feature days after it, so
        # the week would grow by 28 days.
        publish_days(platform, "sales", "2026-01-01", "2026-02-04")
        week = days(29, 31, "2026-01") + days(1, 4, "2026-02")
        backfill_id = launch_backfill(platform, ["store_day_features"], week)
        [backfill_run] = wait_for_backfill_run(platform, backfill_id)  # single_run: one run
        wait_for_run(platform, backfill_run)

        runs = platform.graphql(RUNS)["runsOrError"]["results"]
        assert runs and all(run["status"] == "SUCCESS" for run in runs)
        for run in runs:
            targeted = {key["path"][-1] for key in run["assetSelection"] or []}
            assert targeted <= FEATURE_ASSETS, run  # no run outside `features`, none at all
        assert [
            r["runId"]
            for r in runs
            if {"key": "dagster/backfill", "value": backfill_id} in r["tags"]
        ] == [backfill_run]

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
