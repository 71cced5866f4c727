"""Driving deployments on a running platform: versions in its MLflow, runs through GraphQL.

Versions are LightGBM models trained here on the platform's own feature partitions and
registered in its MLflow exactly as `registered_model` registers a candidate (run, logged model,
version tagged with the run key, alias challenger), for tests about the rollout rather than
about training.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.training_export import LABEL, MODEL_FEATURES
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets_tests.support.platform import RunningPlatform, up_environment
from retrain_assets_tests.support.ui_actions import LAUNCH_RUN, RUN_STATUS
from retrain_assets_tests.support.waiting import wait_until

CLI = str(Path(sys.executable).parent / "retrain-assets")
SELECTOR = {"repositoryLocationName": "retrain_assets", "repositoryName": "__repository__"}
STEP_FAILURES = """
query Failures($id: ID!) {
  logsForRun(runId: $id) {
    ... on EventConnection { events { __typename
      ... on ExecutionStepFailureEvent { stepKey error { message } } } }
  }
}
"""


def days(first: dt.date, last: dt.date) -> list[dt.date]:
    """Return every day from `first` to `last`."""
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def features(
    platform: RunningPlatform, customer: str, first: dt.date, last: dt.date
) -> pd.DataFrame:
    """Return the customer's published `store_day_features` rows of a day range."""
    store = ParquetPartitionStore(str(platform.home / "storage"))
    frame = store.read("store_day_features", [d.isoformat() for d in days(first, last)])
    return frame[frame["customer"] == customer].reset_index(drop=True)


def register_version(
    platform: RunningPlatform,
    customer: str,
    run_key: str,
    train: pd.DataFrame,
    rounds: int,
    label: Callable[[pd.DataFrame], np.ndarray] | None = None,
) -> str:
    """Train a LightGBM model here on `train` and register it in the platform's MLflow."""
    target = label(train) if label else train[LABEL].to_numpy(dtype=float)
    import lightgbm  # here: importing it costs 2 s, and most importers never train

    booster = lightgbm.train(
        {
            "objective": "regression",
            "num_leaves": 15,
            "learning_rate": 0.1,
            "verbose": -1,
            "seed": 3,
            "min_data_in_leaf": 5,
        },
        lightgbm.Dataset(train[MODEL_FEATURES], label=target),
        num_boost_round=rounds,
    )
    registry = MlflowRegistry(platform.mlflow_url())
    run_id = registry.candidate_run(customer, run_key)
    registry.log_candidate(
        run_id, booster, {"rounds": float(rounds)}, train[MODEL_FEATURES].head(20)
    )
    return registry.register(customer, run_key, run_id)


def forecaster(platform: RunningPlatform, customer: str, version: str):
    """Return the registered version's model, loaded from the platform's MLflow."""
    return MlflowRegistry(platform.mlflow_url()).load_version(customer, version)


def launch(
    platform: RunningPlatform,
    job: str,
    partition: str,
    assets: list[str] | None = None,
    run_config: dict | None = None,
) -> str:
    """Launch a job (or assets) for a customer partition, as the UI's launchpad does."""
    selector = {**SELECTOR, "pipelineName": job}
    if assets:
        selector["assetSelection"] = [{"path": [a]} for a in assets]
    params = {
        "selector": selector,
        "runConfigData": run_config or {},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
    }
    result = platform.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return result["run"]["runId"]


def run_status(platform: RunningPlatform, run_id: str) -> str:
    """Return a run's status as the UI shows it."""
    return platform.graphql(RUN_STATUS, {"id": run_id})["runOrError"]["status"]


def wait_for_end(platform: RunningPlatform, run_id: str, seconds: float = 180) -> str:
    """Wait until a run has ended; return SUCCESS or FAILURE (or CANCELED)."""
    ended = {"SUCCESS", "FAILURE", "CANCELED"}
    wait_until(lambda: run_status(platform, run_id) in ended, seconds, f"run {run_id} to end")
    return run_status(platform, run_id)


def step_failures(platform: RunningPlatform, run_id: str) -> dict[str, str]:
    """Return step key -> error message of a run's failed steps."""
    events = platform.graphql(STEP_FAILURES, {"id": run_id})["logsForRun"]["events"]
    return {
        e["stepKey"]: e["error"]["message"]
        for e in events
        if e["__typename"] == "ExecutionStepFailureEvent"
    }


def app(platform: RunningPlatform, sql: str, args: tuple = ()) -> list[tuple]:
    """Query the platform's project database."""
    return platform.query("app", sql, args)


def cli(platform: RunningPlatform, *args: str) -> subprocess.CompletedProcess:
    """Run `retrain-assets` against the platform's databases and MLflow, as an operator would."""
    env = {**up_environment(platform.home, platform.port), **platform.environment()}
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=120)


PARTITION_STATUSES = """
query Statuses($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      assetPartitionStatuses {
        ... on DefaultPartitionStatuses { materializedPartitions failedPartitions }
      }
    }
  }
}
"""


def partition_status(platform: RunningPlatform, asset: str, partition: str) -> str:
    """Return how Dagster shows an asset's partition: materialized, failed or missing."""
    node = platform.graphql(PARTITION_STATUSES, {"key": {"path": [asset]}})["assetNodeOrError"]
    statuses = node["assetPartitionStatuses"]
    if partition in statuses["failedPartitions"]:
        return "failed"
    return "materialized" if partition in statuses["materializedPartitions"] else "missing"


CHECK_PARTITION_STATUSES = """
query CheckStatuses($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      assetChecksOrError {
        ... on AssetChecks {
          checks {
            name
            partitionStatuses {
              ... on AssetCheckDefaultPartitionStatuses {
                succeededPartitions failedPartitions inProgressPartitions skippedPartitions
                executionFailedPartitions
              }
            }
          }
        }
      }
    }
  }
}
"""
CHECK_STATUS_FIELDS = {
    "succeededPartitions": "succeeded",
    "failedPartitions": "failed",
    "inProgressPartitions": "in progress",
    "skippedPartitions": "skipped",
    "executionFailedPartitions": "execution failed",
}


def check_partition_status(
    platform: RunningPlatform, asset: str, check: str, partition: str
) -> str:
    """Return how the Checks tab shows a check's partition: succeeded, failed, execution failed,
    skipped, in progress or missing."""
    node = platform.graphql(CHECK_PARTITION_STATUSES, {"key": {"path": [asset]}})
    checks = node["assetNodeOrError"]["assetChecksOrError"]["checks"]
    [statuses] = [c["partitionStatuses"] for c in checks if c["name"] == check]
    found = [label for field, label in CHECK_STATUS_FIELDS.items() if partition in statuses[field]]
    return found[0] if found else "missing"
