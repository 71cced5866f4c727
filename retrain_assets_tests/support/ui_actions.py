"""Driving a running platform as the Dagster UI does: launch runs and backfills, wait on them.

Every call goes through the webserver's GraphQL API, the same one the UI uses, so what a test
does here is what an ML engineer's click does. Waits poll and fail naming what never happened.
"""

from retrain_assets_tests.support.platform import RunningPlatform
from retrain_assets_tests.support.waiting import wait_until

LAUNCH_BACKFILL = """
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
LAUNCH_RUN = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
RUNS = """
{ runsOrError { ... on Runs { results { runId status assetSelection { path }
  tags { key value } } } } }
"""
RUN_STATUS = "query Run($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"


def days(first: int, last: int, month: str) -> list[str]:
    """Return `month`-DD keys from `first` to `last` inclusive."""
    return [f"{month}-{d:02d}" for d in range(first, last + 1)]


def wait_for_customers(platform: RunningPlatform, count: int, seconds: float = 90) -> None:
    """Wait until the customer_discovery sensor has added the seeded tenants as partitions."""
    sql = "SELECT count(*) FROM dynamic_partitions WHERE partitions_def_name = 'customers'"
    wait_until(
        lambda: platform.query("dagster", sql)[0][0] >= count,
        seconds,
        f"customer_discovery adding {count} customers",
    )


def launch_backfill(platform: RunningPlatform, assets: list[str], days: list[str]) -> str:
    """Launch a partition backfill, as the UI's backfill dialog does; return its id."""
    params = {"assetSelection": [{"path": [a]} for a in assets], "partitionNames": days}
    result = platform.graphql(LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result
    return result["backfillId"]


def launch_run(
    platform: RunningPlatform,
    job: str,
    tags: dict[str, str],
    assets: list[str] | None = None,
    run_config: dict | None = None,
) -> str:
    """Launch a run, as the UI's launchpad does (with `run_config` typed in); return its id."""
    selector = {
        "repositoryLocationName": "retrain_assets",
        "repositoryName": "__repository__",
        "pipelineName": job,
    }
    if assets:
        selector["assetSelection"] = [{"path": [a]} for a in assets]
    params = {
        "selector": selector,
        "runConfigData": run_config or {},
        "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
    }
    result = platform.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return result["run"]["runId"]


def launch_days(platform: RunningPlatform, asset: str, first: str, last: str) -> str:
    """Launch one run materializing a day range of a daily asset; return its id."""
    tags = {"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": last}
    return launch_run(platform, "__ASSET_JOB", tags, [asset])


def wait_for_run(platform: RunningPlatform, run_id: str, seconds: float = 120) -> None:
    """Wait until a run succeeded; fail at once if it failed."""

    def finished() -> bool:
        status = platform.graphql(RUN_STATUS, {"id": run_id})["runOrError"]["status"]
        assert status not in ("FAILURE", "CANCELED"), f"run {run_id} ended {status}"
        return status == "SUCCESS"

    wait_until(finished, seconds, f"run {run_id}")


def publish_days(platform: RunningPlatform, asset: str, first: str, last: str) -> None:
    """Materialize a day range of a daily asset in one run (as a daily job would); wait."""
    wait_for_run(platform, launch_days(platform, asset, first, last))


def backfill_runs(platform: RunningPlatform, backfill_id: str) -> list[dict]:
    """Return the runs the daemon has launched for a backfill."""
    runs = platform.graphql(RUNS)["runsOrError"]["results"]
    tag = {"key": "dagster/backfill", "value": backfill_id}
    return [r for r in runs if tag in r["tags"]]


def wait_for_backfill_run(platform: RunningPlatform, backfill_id: str) -> list[str]:
    """Wait until the daemon has launched a backfill's runs; return their ids.

    The backfill daemon looks at backfills every 30 s and marks one complete only on a later
    pass, so a test waits for the runs (the work) rather than the backfill's status.
    """
    wait_until(lambda: backfill_runs(platform, backfill_id), 60, f"a run of backfill {backfill_id}")
    return [r["runId"] for r in backfill_runs(platform, backfill_id)]
