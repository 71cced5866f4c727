"""The live demo closes the loop by itself: `retrain-assets up` in a fresh home, nothing else.

From a fresh RETRAIN_HOME with the demo on (its clock at the default 20 s a simulated day,
the demo's short intervals of runtime/demo_mode.py), the test makes no call to the platform
but starting `up`; it only reads, as a person in the UI or MLflow would. Stated times on a
quiet machine (stretched by RETRAIN_TEST_PATIENCE, see waiting.py): a version is registered
in MLflow within REGISTERED_SECONDS of starting `up` (the README's "first ten minutes" says
the same), and feature days keep materializing after it: two more simulated days within
MORE_DAYS_SECONDS. Every run that materialized a model asset was requested by the retraining
policy or the GPU poller's hand-off under its run key, never by a feature materialization;
every feature run by `landing_arrivals`, the 120 landed days as one run (the daemon's own
ticking of the landing automation, whose decisions are tested in process in
automation/test_landing_arrivals.py).
"""

from __future__ import annotations

import datetime as dt

import pytest
from mlflow import MlflowClient

from retrain_assets.demo.tenants import DEFAULT_START
from retrain_assets.runtime.demo_mode import DEFAULT_DAY_SECONDS
from retrain_assets_tests.support.demo_milestones import FIRST_SIMULATED_DAY, reached, timeline
from retrain_assets_tests.support.platform import RunningPlatform, running_platform
from retrain_assets_tests.support.waiting import wait_until

pytestmark = pytest.mark.system

REGISTERED_SECONDS = 300  # `up` to the first version in MLflow, on a quiet machine
MORE_DAYS_SECONDS = 4 * DEFAULT_DAY_SECONDS  # two simulated days after that, with slack
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
MODEL_ASSETS = ("training_job", "model_candidate", "registered_model", "deployment_decision")
FEATURE_ASSETS = ("sales", "store_day_features")
# who may start the model side, and the run keys they give their runs
MODEL_LAUNCHERS = {"retraining_policy": "decision-", "gpu_job_poller": "candidate-"}
MATERIALIZED = """
query Mats($asset: [String!]!) {
  assetNodeOrError(assetKey: {path: $asset}) {
    ... on AssetNode { assetMaterializations { partition runId } }
  }
}
"""
RUNS = """
query Runs($ids: [String!]) {
  runsOrError(filter: {runIds: $ids}) {
    ... on Runs { results { runId status assetSelection { path } tags { key value } } }
  }
}
"""


def registered_versions(platform: RunningPlatform) -> list[str]:
    """Return every registered version in MLflow as `<model> v<version>`."""
    client = MlflowClient(tracking_uri=platform.mlflow_url())
    return [f"{v.name} v{v.version}" for v in client.search_model_versions()]


def materialized(platform: RunningPlatform, asset: str) -> list[dict]:
    """Return every materialization of an asset (partition and run id) the UI would list."""
    data = platform.graphql(MATERIALIZED, {"asset": [asset]})["assetNodeOrError"]
    return data["assetMaterializations"]


def simulated_feature_days(platform: RunningPlatform) -> set[dt.date]:
    """Return the simulated days (after the 120 landed at start) with features materialized."""
    days = {
        dt.date.fromisoformat(m["partition"]) for m in materialized(platform, FEATURE_ASSETS[1])
    }
    return {day for day in days if day >= FIRST_SIMULATED_DAY}


def runs(platform: RunningPlatform, run_ids: set[str]) -> list[dict]:
    """Return the runs with these ids, their tags as a dict and their selected assets as a set."""
    found = platform.graphql(RUNS, {"ids": sorted(run_ids)})["runsOrError"]["results"]
    return [
        {
            "id": run["runId"],
            "tags": {t["key"]: t["value"] for t in run["tags"]},
            "assets": {k["path"][-1] for k in run["assetSelection"] or []},
        }
        for run in found
    ]


def test_the_live_demo_registers_a_model_and_keeps_publishing_days_by_itself(tmp_path):
    env = {"RETRAIN_DEMO_DAY_SECONDS": str(DEFAULT_DAY_SECONDS)}  # the demo clock, as `make up`
    started = dt.datetime.now(dt.UTC)
    with running_platform(tmp_path, env=env) as platform:
        wait_until(
            lambda: registered_versions(platform),
            REGISTERED_SECONDS,
            "a model version registered in MLflow",
            interval=5,
            detail=lambda: platform.output.read_text()[-3000:],
        )
        days_then = simulated_feature_days(platform)
        assert days_then, "a model registered before any simulated day's features"
        wait_until(
            lambda: len(simulated_feature_days(platform) - days_then) >= 2,
            MORE_DAYS_SECONDS,
            f"two more simulated days materialized after {max(days_then)}",
            interval=2,
            detail=lambda: str(sorted(simulated_feature_days(platform))),
        )

        model_runs = {m["runId"] for a in MODEL_ASSETS for m in materialized(platform, a)}
        feature_runs = {m["runId"] for a in FEATURE_ASSETS for m in materialized(platform, a)}
        assert model_runs and not model_runs & feature_runs
        for run in runs(platform, model_runs):
            sensor, key = run["tags"].get("dagster/sensor_name"), run["tags"].get("dagster/run_key")
            assert sensor in MODEL_LAUNCHERS, run
            assert key and key.startswith(MODEL_LAUNCHERS[sensor]), run
            assert not run["assets"] & set(FEATURE_ASSETS), run
        feature_side = runs(platform, feature_runs)
        for run in feature_side:
            assert run["tags"].get("dagster/sensor_name") == "landing_arrivals", run
            assert run["assets"] <= set(FEATURE_ASSETS), run
        # the landed history is one run of the data side, its whole range, for new files
        history = [
            run
            for run in feature_side
            if run["tags"].get(RANGE_START) == str(DEFAULT_START)
            and run["tags"].get(RANGE_END) == str(FIRST_SIMULATED_DAY - dt.timedelta(days=1))
        ]
        assert [(r["assets"], r["tags"].get("retrain/trigger")) for r in history] == [
            (set(FEATURE_ASSETS), "landing")
        ], feature_side
        print(f"the demo's milestones so far:\n{timeline(reached(platform.query, started))}")
        assert platform.stop() == 0
