"""Journey (a): a feature backfill launched from the asset page finishes and trains nothing."""

import datetime as dt
import time

import pytest

from retrain_assets_tests.support.ui_actions import backfill_runs, publish_days
from retrain_assets_tests.ui.dagster_ui import (
    choose_day_range,
    follow_backfill,
    launch_backfill,
    open_materialize_dialog,
)
from retrain_assets_tests.ui.tenants import FIRST_FEATURE_DAY, FIRST_LANDED, land

pytestmark = [pytest.mark.system, pytest.mark.browser]

FEATURE_ASSETS = {"sales", "store_day_features"}
# the first week of feature days (each with its whole look-back landed)
WEEK_DAYS = [
    (dt.date.fromisoformat(FIRST_FEATURE_DAY) + dt.timedelta(days=i)).isoformat() for i in range(7)
]
WEEK = (WEEK_DAYS[0], WEEK_DAYS[-1])
RUNS_SINCE = """
query Runs($since: Float!) {
  runsOrError(filter: {createdAfter: $since}) { ... on Runs { results {
    runId status assetSelection { path } tags { key value } } } }
}
"""
POLLER_TICKS = """
query Ticks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor { sensorState { ticks(limit: 10) { timestamp status } } }
  }
}
"""
POLLER = {
    "repositoryLocationName": "retrain_assets",
    "repositoryName": "__repository__",
    "sensorName": "gpu_job_poller",
}


def poller_ticks_after(platform, after: float) -> int:
    """Count the gpu_job_poller's finished ticks after the epoch time `after`."""
    sensor = platform.graphql(POLLER_TICKS, {"selector": POLLER})["sensorOrError"]
    return sum(
        1
        for t in sensor["sensorState"]["ticks"]
        if t["timestamp"] > after and t["status"] != "STARTED"
    )


def test_a_week_of_features_backfilled_from_the_asset_page_finishes_and_trains_nothing(
    journey, ui_platform
):
    platform = ui_platform
    customer = land(platform, "backfill")
    publish_days(platform, "sales", FIRST_LANDED.isoformat(), WEEK[1])  # the look-back
    launched_at = time.time()

    dialog = open_materialize_dialog(journey, "store_day_features")
    journey.shot("store_day_features: the materialize dialog")
    choose_day_range(journey, dialog, *WEEK, count=7)
    journey.shot("a week of partitions chosen")
    backfill_id = launch_backfill(journey, dialog)
    journey.shot(f"backfill {backfill_id} created")

    follow_backfill(journey, backfill_id, seconds=180)
    journey.shot("the backfill succeeded")
    done_at = time.time()

    # The backfill: one run (single-run policy), feature assets only, succeeded.
    [run] = backfill_runs(platform, backfill_id)
    assert run["status"] == "SUCCESS"
    journey.page.get_by_role("tab", name="Runs").click()
    journey.wait_visible(
        journey.page.get_by_text(run["runId"][:8], exact=True), 60, "the backfill's run listed"
    )
    journey.shot("the backfill's one run")
    assert {key["path"][-1] for key in run["assetSelection"]} == {"store_day_features"}
    republished = platform.query(
        "app",
        "SELECT partition_date::text, rows_per_customer ->> %s FROM feature_snapshots "
        "WHERE backfill_id = %s ORDER BY partition_date",
        (customer, backfill_id),
    )
    assert [day for day, _ in republished] == WEEK_DAYS
    assert {rows for _, rows in republished} == {"8"}  # the tenant's 2 stores x 4 items

    # The daemon's sensors have looked at the platform since, and no run has touched the
    # models of the customer whose features changed (the platform is shared: other tests'
    # customers may have runs of their own).
    journey.wait_for(
        lambda: poller_ticks_after(platform, done_at) >= 2,
        60,
        "two gpu_job_poller ticks after the backfill",
    )
    since = platform.graphql(RUNS_SINCE, {"since": launched_at})["runsOrError"]["results"]
    assert run["runId"] in {r["runId"] for r in since}
    for other in since:
        targeted = {key["path"][-1] for key in other["assetSelection"] or []}
        tags = {tag["key"]: tag["value"] for tag in other["tags"]}
        assert targeted <= FEATURE_ASSETS or customer not in (
            tags.get("dagster/partition"),
            tags.get("customer"),
        ), other
    decided = platform.query(
        "app", "SELECT count(*) FROM retraining_decisions WHERE customer = %s", (customer,)
    )
    assert decided == [(0,)]
    assert journey.steps  # the screenshots this journey kept
