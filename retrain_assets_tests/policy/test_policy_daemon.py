"""The retraining policy through the real platform: `retrain-assets up`, its daemon, Postgres.

One platform for the module (starting one costs most of the time). The fixture publishes
the three demo tenants' history with a single-run backfill while the policy ticks every 2 s,
and lets the policy make their first decisions; the tests then follow one another in the
order a day of operations would: a backfill, new days, a tick evaluated twice, drift with its
approval, a person training from the UI.

Settings (through the CLI): northwind-us and lindenhof-de need 20 days of history, so a tick
half-way through the 34-day history backfill would see enough (decisions wait for settled
data: they must come after the backfill, on all 34 days); sakura-jp needs 60 (so it stays
"not enough history"); every customer retrains at 1,000 new rows, which a week of
northwind-us crosses (240 rows a day) and a week of lindenhof-de does not (100); the rest of a
half-published history would cross it for both (the issue's 6 trainings instead of 3; 4
instead of 2 here). lindenhof-de's drift threshold is so low that any new week asks for
approval.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from retrain_assets.automation.retraining_policy import retraining_policy
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets_tests.conftest import SEEN_COMMUNITY_NOTE
from retrain_assets_tests.support.platform import RunningPlatform, running_platform, up_environment
from retrain_assets_tests.support.ui_actions import (
    RUNS,
    days,
    launch_backfill,
    launch_days,
    launch_run,
    publish_days,
    wait_for_backfill_run,
    wait_for_customers,
    wait_for_run,
    wait_until,
)
from retrain_assets_tests.ui.browser import journey_on
from retrain_assets_tests.ui.dagster_ui import freshness_detail, sensor_ticks

pytestmark = pytest.mark.system

CLI = str(Path(sys.executable).parent / "retrain-assets")
BIG, MID, SMALL = "northwind-us", "lindenhof-de", "sakura-jp"  # 240, 100, 45 rows a day
HISTORY = days(29, 31, "2026-01") + days(1, 28, "2026-02") + days(1, 3, "2026-03")
NEW_WEEK = days(4, 10, "2026-03")
OLD_WEEK = days(1, 7, "2026-02")
POLICY_INTERVAL = 2  # seconds between the policy's ticks in this module
SENSOR = """
query Sensor($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor { id sensorState { ticks(limit: 20) { timestamp status skipReason runIds } } }
  }
}
"""
STOP = """
mutation Stop($id: String!) {
  stopSensor(id: $id) { __typename ... on PythonError { message } }
}
"""
START = """
mutation Start($selector: SensorSelector!) {
  startSensor(sensorSelector: $selector) { __typename ... on PythonError { message } }
}
"""
SELECTOR = {
    "repositoryLocationName": "retrain_assets",
    "repositoryName": "__repository__",
    "sensorName": "retraining_policy",
}


def decisions(platform: RunningPlatform) -> list[tuple]:
    """Return (id, customer, policy, decided_by, dagster_run_id) of every decision."""
    return platform.query(
        "app",
        "SELECT id, customer, policy, decided_by, dagster_run_id FROM retraining_decisions "
        "ORDER BY id",
    )


def training_runs(platform: RunningPlatform) -> list[dict]:
    """Return every run that targets training_job, with its tags as a dict."""
    runs = platform.graphql(RUNS)["runsOrError"]["results"]
    found = []
    for run in runs:
        if {"training_job"} == {k["path"][-1] for k in run["assetSelection"] or []}:
            found.append({**run, "tags": {t["key"]: t["value"] for t in run["tags"]}})
    return found


def machine_state(platform: RunningPlatform, customer: str) -> str | None:
    rows = platform.query(
        "app",
        "SELECT state FROM machine_pointers WHERE machine = 'training' AND customer = %s",
        (customer,),
    )
    return rows[0][0] if rows else None


def all_ticks(platform: RunningPlatform) -> list[dict]:
    """Return the policy sensor's latest ticks, newest first, as the UI shows them."""
    sensor = platform.graphql(SENSOR, {"selector": SELECTOR})["sensorOrError"]
    return sensor["sensorState"]["ticks"]


def ticks(platform: RunningPlatform) -> list[dict]:
    """Return the policy sensor's latest finished ticks, newest first."""
    return [t for t in all_ticks(platform) if t["status"] != "STARTED"]


def wait_for_ticks(platform: RunningPlatform, after: float, count: int = 1) -> list[dict]:
    """Wait until the sensor has ticked `count` times after the epoch time `after`."""
    wait_until(
        lambda: sum(t["timestamp"] > after for t in ticks(platform)) >= count,
        60,
        f"{count} policy ticks",
    )
    return [t for t in ticks(platform) if t["timestamp"] > after]


def cli(platform: RunningPlatform, *args: str) -> subprocess.CompletedProcess:
    """Run `retrain-assets` against the platform's databases, as an operator would."""
    env = {**up_environment(platform.home, platform.port), **platform.environment()}
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=60)


@dataclass(frozen=True)
class World:
    """The running platform, the history backfill's run and the old week's backfill."""

    platform: RunningPlatform
    history_run: str
    backfill_id: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The platform with history backfilled, the first decisions trained, a week backfilled.

    The history is one single-run backfill of `store_day_features` the policy ticks through
    (every 2 s). The backfill of an old week is launched once the first decisions are
    recorded, so the backfill daemon's pick-up time overlaps the first trainings; the backfill
    test looks at the ticks after both are over.
    """
    fast = {
        "RETRAIN_POLICY_INTERVAL_SECONDS": str(POLICY_INTERVAL),
        "RETRAIN_POLL_INTERVAL_SECONDS": "2",
        "RETRAIN_LANDING_AUTOMATION": "off",
        "RETRAIN_SERVING_REPORT_INTERVAL_SECONDS": "2",
    }  # these tests publish each day themselves
    with running_platform(tmp_path_factory.mktemp("policy"), env=fast) as running:
        sales = launch_days(running, "sales", "2026-01-01", "2026-03-10")  # meanwhile: settings
        wait_for_customers(running, 3)
        # 20 of HISTORY's 34 days: a tick half-way through its backfill would see enough
        for customer, history in ((BIG, 20), (MID, 20), (SMALL, 60)):
            done = cli(
                running,
                "policy",
                "set",
                customer,
                "--min-history-days",
                str(history),
                "--min-new-rows",
                "1000",
            )
            assert done.returncode == 0, done.stderr
        done = cli(running, "policy", "set", MID, "--drift-threshold", "0.01")
        assert done.returncode == 0, done.stderr
        wait_for_run(running, sales)
        history = launch_backfill(running, ["store_day_features"], HISTORY)
        [history_run] = wait_for_backfill_run(running, history)
        wait_for_run(running, history_run)
        wait_until(
            lambda: (
                {(c, p) for _, c, p, _, _ in decisions(running)}
                == {(BIG, "schedule"), (MID, "schedule")}
            ),
            90,
            "the first decisions",
        )
        backfill = launch_backfill(running, ["store_day_features"], OLD_WEEK)
        wait_until(
            lambda: machine_state(running, BIG) == machine_state(running, MID) == "DONE",
            150,
            "the first trainings",
        )
        yield World(running, history_run, backfill)


def test_first_decisions_need_history_and_are_launched_once(world):
    platform = world.platform
    rows = decisions(platform)
    assert [(c, p, by) for _, c, p, by, _ in rows] == [
        (c, "schedule", "retraining_policy sensor") for c in sorted([BIG, MID])
    ]
    runs = training_runs(platform)
    assert sorted(r["tags"]["retrain/decision_id"] for r in runs) == sorted(
        str(i) for i, *_ in rows
    )
    assert {r["runId"] for r in runs} == {run_id for *_, run_id in rows}
    assert {r["tags"]["dagster/run_key"] for r in runs} == {f"decision-{i}" for i, *_ in rows}
    # the old week's backfill may hold every decision for a while ("settled data"); once its
    # run is over, each tick says again why sakura-jp is not trained
    wait_until(
        lambda: any(
            f"{SMALL}: not enough history yet: 34 of 60 days" in (t["skipReason"] or "")
            for t in ticks(platform)
        ),
        300,
        f"a policy tick saying why {SMALL} waits",
        detail=lambda: str([t["skipReason"] for t in ticks(platform)][:3]),
    )


def test_first_decisions_wait_for_the_history_backfill_and_cover_all_of_it(world):
    """The issue's case: decisions on a half-published history, then volume for the rest."""
    platform = world.platform
    [(ended,)] = platform.query(
        "dagster", "SELECT end_time FROM runs WHERE run_id = %s", (world.history_run,)
    )
    rows = platform.query(
        "app",
        "SELECT customer, first_day, last_day, decided_at FROM retraining_decisions ORDER BY id",
    )
    assert [(c, str(first), str(last)) for c, first, last, _ in rows] == [
        (c, HISTORY[0], HISTORY[-1]) for c in sorted([BIG, MID])
    ]
    assert all(decided.timestamp() > ended for *_, decided in rows)
    # the first trainings are over and the policy has ticked since: no volume decision
    wait_for_ticks(platform, time.time(), 2)
    assert len(decisions(platform)) == 2


def test_a_backfill_over_a_week_of_features_makes_no_decision_and_no_model_run(world):
    platform, backfill = world.platform, world.backfill_id
    first_decisions, first_runs = decisions(platform), training_runs(platform)
    assert len(first_decisions) == len(first_runs) == 2  # the first trainings, nothing else
    [backfill_run] = wait_for_backfill_run(platform, backfill)
    wait_for_run(platform, backfill_run)  # its days are published: the backfill is done for us
    republished = platform.query(
        "app", "SELECT count(*) FROM feature_snapshots WHERE backfill_id = %s", (backfill,)
    )[0][0]
    assert republished == 7
    after = wait_for_ticks(platform, time.time(), 2)  # nobody busy, the week republished
    assert decisions(platform) == first_decisions
    assert training_runs(platform) == first_runs
    # Counted, the week would be 1,680 new rows for northwind-us and 700 for lindenhof-de.
    assert f"{BIG}: nothing due" in after[0]["skipReason"]
    assert "0 of 1000 new rows" in after[0]["skipReason"]


def test_new_days_crossing_the_volume_threshold_make_one_decision_and_one_run(world):
    platform = world.platform
    before = {i for i, *_ in decisions(platform)}
    publish_days(platform, "store_day_features", NEW_WEEK[0], NEW_WEEK[-1])
    wait_until(lambda: len(decisions(platform)) > len(before), 30, "a volume decision")
    wait_for_ticks(platform, time.time())
    new = [row for row in decisions(platform) if row[0] not in before]
    assert [(c, p) for _, c, p, _, _ in new] == [(BIG, "volume")]
    decision_id = new[0][0]
    wait_until(
        lambda: any(
            r["tags"].get("retrain/decision_id") == str(decision_id)
            for r in training_runs(platform)
        ),
        30,
        "the decision's run",
    )
    runs = [
        r
        for r in training_runs(platform)
        if r["tags"].get("retrain/decision_id") == str(decision_id)
    ]
    assert len(runs) == 1 and runs[0]["tags"]["dagster/partition"] == BIG
    assert runs[0]["tags"]["retrain/policy"] == "volume"
    reasons = [t["skipReason"] for t in ticks(platform) if t["skipReason"]]
    assert f"{SMALL}: not enough history yet: 41 of 60" in reasons[0]


@contextmanager
def policy_stopped(platform: RunningPlatform) -> Iterator[None]:
    """Stop the daemon's policy sensor and wait out a tick in flight; start it again on exit.

    A tick the daemon began before the stop still finishes (and may request runs); it may
    also be recorded a moment after the stop. So the stop counts once two looks, two policy
    intervals apart, find no tick STARTED and the same newest tick. The sensor is started
    again even when the body fails: a stopped policy would time out every later test.
    """
    sensor = platform.graphql(SENSOR, {"selector": SELECTOR})["sensorOrError"]
    stopped = platform.graphql(STOP, {"id": sensor["id"]})["stopSensor"]
    assert stopped["__typename"] == "StopSensorMutationResult", stopped
    looks: list[tuple] = []

    def quiet() -> bool:
        seen = all_ticks(platform)
        looks.append(tuple((t["timestamp"], t["status"]) for t in seen[:1]))
        settled = all(t["status"] != "STARTED" for t in seen)
        return settled and len(looks) > 1 and looks[-1] == looks[-2]

    try:
        wait_until(quiet, 60, "the policy's last tick to end", interval=2 * POLICY_INTERVAL)
        yield
    finally:
        started = platform.graphql(START, {"selector": SELECTOR})["startSensor"]
        assert started["__typename"] == "Sensor", started


def test_the_same_tick_evaluated_twice_requests_one_run(world):
    """A tick whose requests were lost (the daemon died) and then evaluated again.

    The setting changes only once the daemon's sensor is stopped: set before, a daemon tick
    could decide for sakura-jp (and launch it) before the two evaluations here.
    """
    platform = world.platform
    with policy_stopped(platform):
        done = cli(platform, "policy", "set", SMALL, "--min-history-days", "30")
        assert done.returncode == 0, done.stderr
        env = platform.environment()
        with pytest.MonkeyPatch.context() as patch:
            for key, value in env.items():
                if key.startswith("RETRAIN_") or key == "DAGSTER_HOME":
                    patch.setenv(key, value)
            with dg.DagsterInstance.get() as instance:
                resources = {
                    "project_db": ProjectDatabase(),
                    "partition_storage": PartitionStorage(),
                }
                first = retraining_policy(dg.build_sensor_context(instance, resources=resources))
                again = retraining_policy(dg.build_sensor_context(instance, resources=resources))
        mine = [r for r in first.run_requests if r.partition_key == SMALL]
        assert len(mine) == 1, first.skip_reason
        assert [r.run_key for r in again.run_requests if r.partition_key == SMALL] == [
            mine[0].run_key
        ]
        ours = [row for row in decisions(platform) if row[1] == SMALL]
        assert len(ours) == 1 and ours[0][4] is None  # decided once, not launched yet

    wait_until(
        lambda: any(
            r["tags"].get("retrain/decision_id") == str(ours[0][0]) for r in training_runs(platform)
        ),
        30,
        "the daemon launching the decision",
    )
    wait_for_ticks(platform, time.time())
    runs = [
        r
        for r in training_runs(platform)
        if r["tags"].get("retrain/decision_id") == str(ours[0][0])
    ]
    assert len(runs) == 1 and runs[0]["tags"]["dagster/run_key"] == mine[0].run_key
    assert len([row for row in decisions(platform) if row[1] == SMALL]) == 1


@pytest.mark.browser
def test_drift_waits_for_approval_and_the_approval_is_one_decision(world, chromium, request):
    platform = world.platform
    alerts = platform.query("app", "SELECT id, customer FROM drift_alerts")
    assert [c for _, c in alerts] == [MID]  # raised when the new week landed
    assert [row for row in decisions(platform) if row[1] == MID and row[2] != "schedule"] == []
    latest = next(t["skipReason"] for t in ticks(platform) if t["skipReason"])
    assert f"{MID}: drift: " in latest and "waiting for approval" in latest, latest
    assert f"(launch approve_drift_retraining for {MID})" in latest
    # What waits for a person shows in `status` and on the customer's freshness check.
    wait_until(
        lambda: "waits for a person: drift alert" in cli(platform, "status").stdout,
        60,
        "status naming the approval",
    )
    status = cli(platform, "status", "--customer", MID).stdout
    assert f"launch approve_drift_retraining for {MID}" in status, status
    assert platform.graphql(SEEN_COMMUNITY_NOTE)["setNuxSeen"] is True
    with journey_on(chromium, platform.port, request.node.name) as journey:
        check = freshness_detail(journey, MID)
        journey.wait_visible(check.get_by_text("waits for approval"), 60, "the pending approval")
        assert "approve_drift_retraining/playground" in check.inner_text()
        journey.shot(f"serving_model_fresh of {MID}: an approval waits")
        # The Automation page: retraining_policy's ticks skip (none failed), the newest saying
        # what waits and how to approve it (the skip reason is the tag's tooltip).
        page = sensor_ticks(journey, "retraining_policy", "0 runs requested")
        assert "Failure" not in page, page
        journey.page.get_by_text("0 runs requested").first.hover()
        journey.wait_visible(
            journey.page.get_by_text(f"(launch approve_drift_retraining for {MID})").first,
            30,
            "the newest tick's skip reason",
        )
        journey.shot("retraining_policy's newest tick: the approval waits")

    launch_run(platform, "approve_drift_retraining", {"dagster/partition": MID})
    wait_until(
        lambda: any(row[1] == MID and row[2] == "drift" for row in decisions(platform)),
        60,
        "the approval's decision",
    )
    drift = [row for row in decisions(platform) if row[1] == MID and row[2] == "drift"]
    wait_until(
        lambda: any(
            r["tags"].get("retrain/decision_id") == str(drift[0][0])
            for r in training_runs(platform)
        ),
        30,
        "the approved decision's run",
    )
    wait_for_ticks(platform, time.time())
    drift = [row for row in decisions(platform) if row[1] == MID and row[2] == "drift"]
    assert len(drift) == 1 and drift[0][3] == "approval via the Dagster UI"
    runs = [
        r
        for r in training_runs(platform)
        if r["tags"].get("retrain/decision_id") == str(drift[0][0])
    ]
    assert len(runs) == 1
    resolved = platform.query("app", "SELECT resolved_by FROM drift_alerts")
    assert resolved == [(drift[0][0],)]
    assert "waits for a person" not in cli(platform, "status", "--customer", MID).stdout


def test_a_manual_materialization_is_recorded_as_a_manual_decision(world):
    platform = world.platform
    wait_until(lambda: machine_state(platform, BIG) == "DONE", 120, "northwind's training")
    run_id = launch_run(platform, "__ASSET_JOB", {"dagster/partition": BIG}, ["training_job"])
    wait_until(
        lambda: any(row[4] == run_id for row in decisions(platform)), 60, "the manual decision"
    )
    manual = [row for row in decisions(platform) if row[4] == run_id]
    assert [(c, p, by) for _, c, p, by, _ in manual] == [
        (BIG, "manual", "manual via the Dagster UI")
    ]
    listed = cli(platform, "decisions", "--customer", BIG)
    assert listed.returncode == 0, listed.stderr
    assert "manual   2026-" in listed.stdout and run_id in listed.stdout
