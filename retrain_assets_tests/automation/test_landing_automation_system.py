"""New days flow into features by themselves: `retrain-assets up` with the demo, nothing else.

A fresh RETRAIN_HOME: `up` lands the three demo tenants' 120 days, and from then on the only
actor is the daemon's `landing_arrivals` sensor. The test lands further days with the
simulator while the platform runs (as the live demo loop will), then a corrected file for a
past day, and reads what happened through the webserver's GraphQL API and the project
database. Stated times (stretched by RETRAIN_TEST_PATIENCE): the 120 landed days are
published within 240 s of `ready`; each new day within 60 s of landing.
"""

from __future__ import annotations

import datetime as dt
import time

import pandas as pd
import pytest

from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import DEMO_TENANTS
from retrain_assets.policy.decisions import Decision
from retrain_assets.policy.rule import policy_outcome
from retrain_assets.policy.thresholds import DEFAULTS
from retrain_assets.store.snapshots import SnapshotRecord
from retrain_assets_tests.support.platform import RunningPlatform, running_platform
from retrain_assets_tests.support.ui_actions import RUNS
from retrain_assets_tests.support.waiting import wait_until

pytestmark = pytest.mark.system

ENV = {
    "RETRAIN_LANDING_INTERVAL_SECONDS": "2",
    "RETRAIN_LANDING_SETTLE_SECONDS": "1",
    # The simulated days are months old: a cut-off this long means "wait for every customer".
    "RETRAIN_DAY_CUTOFF_HOURS": "100000",
    "RETRAIN_POLICY_INTERVAL_SECONDS": "3600",  # one tick at start, before anything is published
}
FEATURE_SIDE = {"sales", "store_day_features"}
FIRST, LAST = dt.date(2026, 1, 1), dt.date(2026, 4, 30)
NEW1, NEW2 = dt.date(2026, 5, 1), dt.date(2026, 5, 2)
LATE = dt.date(2026, 4, 20)
BIG, MID, SMALL = DEMO_TENANTS  # northwind-us, lindenhof-de, sakura-jp
TICKS = """
query Ticks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor { sensorState { ticks(limit: 10) { timestamp status skipReason } } }
  }
}
"""
SELECTOR = {
    "repositoryLocationName": "retrain_assets",
    "repositoryName": "__repository__",
    "sensorName": "landing_arrivals",
}
MATERIALIZATIONS = """
query Mats($asset: [String!]!, $partitions: [String!]) {
  assetNodeOrError(assetKey: {path: $asset}) {
    ... on AssetNode { assetMaterializations(partitions: $partitions) {
      partition runId metadataEntries { label
        ... on IntMetadataEntry { intValue } ... on BoolMetadataEntry { boolValue } } } }
  }
}
"""


def snapshots(platform: RunningPlatform) -> list[tuple]:
    """Return (day, data_version, rows_per_customer, from_backfill, run_id), oldest first."""
    return platform.query(
        "app",
        "SELECT partition_date, data_version, rows_per_customer, from_backfill, run_id "
        "FROM feature_snapshots ORDER BY id",
    )


def published(platform: RunningPlatform) -> dict[dt.date, SnapshotRecord]:
    """Return the latest record of every published day, as the policy reads them."""
    latest: dict[dt.date, SnapshotRecord] = {}
    for day, version, rows, backfill, run_id in snapshots(platform):
        latest[day] = SnapshotRecord(day, version, "", rows, backfill, None, run_id)
    return latest


def runs(platform: RunningPlatform) -> list[dict]:
    """Return every run, oldest first, with its tags as a dict and its assets as a set."""
    found = platform.graphql(RUNS)["runsOrError"]["results"]
    return [
        {
            **run,
            "tags": {t["key"]: t["value"] for t in run["tags"]},
            "assets": {k["path"][-1] for k in run["assetSelection"] or []},
        }
        for run in reversed(found)
    ]


def automation_runs(platform: RunningPlatform) -> list[tuple]:
    """Return (first day, last day, trigger, assets, status) of the sensor's runs."""
    return [
        (
            r["tags"]["dagster/asset_partition_range_start"],
            r["tags"]["dagster/asset_partition_range_end"],
            r["tags"]["retrain/trigger"],
            r["assets"],
            r["status"],
        )
        for r in runs(platform)
        if r["tags"].get("retrain/automation") == "landing_arrivals"
    ]


def ticks_after(platform: RunningPlatform, after: float) -> list[dict]:
    sensor = platform.graphql(TICKS, {"selector": SELECTOR})["sensorOrError"]
    return [
        t
        for t in sensor["sensorState"]["ticks"]
        if t["timestamp"] > after and t["status"] != "STARTED"
    ]


def materializations(platform: RunningPlatform, asset: str, day: dt.date) -> list[dict]:
    data = platform.graphql(MATERIALIZATIONS, {"asset": [asset], "partitions": [str(day)]})
    return data["assetNodeOrError"]["assetMaterializations"]


def settled_runs(platform: RunningPlatform) -> bool:
    return all(run[-1] == "SUCCESS" for run in automation_runs(platform))


def test_landed_days_publish_themselves_and_a_late_file_republishes_its_day_once(tmp_path):
    with running_platform(tmp_path, env=ENV) as platform:
        landing = str(platform.home / "landing")
        expected = {FIRST + dt.timedelta(days=i) for i in range(120)}

        # Nothing but `up`: the 120 landed days become one run of the data side.
        wait_until(
            lambda: set(published(platform)) == expected and settled_runs(platform),
            240,
            "the 120 landed days published",
            detail=lambda: str(automation_runs(platform)),
        )
        assert automation_runs(platform) == [
            (str(FIRST), str(LAST), "landing", FEATURE_SIDE, "SUCCESS")
        ]
        assert {backfill for *_, backfill, _ in snapshots(platform)} == {False}
        first_day = materializations(platform, "store_day_features", FIRST)[0]
        facts = {
            m["label"]: m.get("intValue", m.get("boolValue")) for m in first_day["metadataEntries"]
        }
        assert facts["partial_history"] is True and facts["history_days_available"] == 0

        # A new day waits for every active customer, then publishes with all three.
        landed_at = time.time()
        for spec in (BIG, MID):
            land_tenant(landing, spec, [NEW1])
        wait_until(
            lambda: any(
                "waiting for sakura-jp" in (t["skipReason"] or "")
                for t in ticks_after(platform, landed_at + 1)
            ),
            60,
            "a tick saying 2026-05-01 waits for sakura-jp",
        )
        assert NEW1 not in published(platform)
        land_tenant(landing, SMALL, [NEW1])
        wait_until(lambda: NEW1 in published(platform), 60, "2026-05-01 published")
        assert set(published(platform)[NEW1].rows_per_customer) == {s.name for s in DEMO_TENANTS}
        for spec in DEMO_TENANTS:
            land_tenant(landing, spec, [NEW2])
        wait_until(
            lambda: NEW2 in published(platform) and settled_runs(platform),
            60,
            "2026-05-02 published",
        )
        before_late = published(platform)
        late_runs_before = len(automation_runs(platform))

        # A corrected file for a past day: that day is read once more, and the feature days
        # that look back on it follow; none of it is new data for the policy.
        late = platform.home / "landing" / SMALL.name / f"{LATE}.csv"
        frame = pd.read_csv(late)
        frame.loc[0, "units_sold"] += 7
        frame.to_csv(late, index=False)
        wait_until(
            lambda: (
                len(automation_runs(platform)) >= late_runs_before + 2 and settled_runs(platform)
            ),
            90,
            "the late day and the days after it",
            detail=lambda: str(automation_runs(platform)),
        )
        quiet_since = time.time()
        wait_until(lambda: len(ticks_after(platform, quiet_since)) >= 3, 30, "three more ticks")
        assert automation_runs(platform)[late_runs_before:] == [
            (str(LATE), str(LATE), "landing", FEATURE_SIDE, "SUCCESS"),
            (
                str(LATE + dt.timedelta(days=1)),
                str(NEW2),
                "features_behind_sales",
                {"store_day_features"},
                "SUCCESS",
            ),
        ]
        assert len(materializations(platform, "sales", LATE)) == 2  # the first read, the late one
        assert len(materializations(platform, "sales", LATE - dt.timedelta(days=1))) == 1
        after_late = published(platform)
        changed = sorted(
            d for d in after_late if after_late[d].data_version != before_late[d].data_version
        )
        assert changed == [LATE + dt.timedelta(days=i) for i in range((NEW2 - LATE).days + 1)]

        last = Decision(
            1,
            SMALL.name,
            "schedule",
            "",
            dt.date(2026, 2, 1),
            NEW2,
            {},
            "test",
            {},
            dt.datetime.now(dt.UTC),
            None,
        )

        def no_drift(*_):
            raise AssertionError("no new day: drift is never measured")

        outcome = policy_outcome(
            SMALL.name, DEFAULTS, after_late, last, None, None, dt.datetime.now(dt.UTC), no_drift
        )
        assert outcome.action == "skip" and "0 of 1000 new rows" in outcome.reason

        # Nothing on the model side ever started: no run outside the data side, no decision.
        assert all(run["assets"] <= FEATURE_SIDE for run in runs(platform))
        assert platform.query("app", "SELECT count(*) FROM retraining_decisions")[0][0] == 0
        assert platform.stop() == 0
