"""Freshness per customer: the verdicts, their reasons, and what `serving_report` reports.

On a real project database: published days, champion moves, gate verdicts, rollouts and a
drift alert written as the platform writes them, one customer per situation.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass

import dagster as dg
import pytest

from retrain_assets.automation.serving_report import serving_report
from retrain_assets.customers import CUSTOMER_PARTITIONS
from retrain_assets.models import freshness_report
from retrain_assets.models.freshness import judge_freshness
from retrain_assets.models.freshness_check import CHECK_KEY
from retrain_assets.models.freshness_report import (
    JOB_NAME,
    ORPHAN_AFTER_SECONDS,
    REPORTER,
    REPORTER_TAG,
    fail_orphaned_reports,
    serving_freshness_job,
)
from retrain_assets.runtime.serving_status import serving_lines
from retrain_assets.store.database import transaction
from retrain_assets.store.resource import ProjectDatabase

DAY0 = dt.date(2026, 3, 1)
CUSTOMERS = ("fresh-co", "drift-co", "stale-co", "stopped-co", "new-co")


def day(n: int) -> dt.date:
    return DAY0 + dt.timedelta(days=n - 1)


def window(first: int, last: int) -> str:
    return f"{day(first)} .. {day(last)}"


def publish(cur, days: range, last_rows: dict[str, int]) -> None:
    for n in days:
        rows = {c: 10 for c in CUSTOMERS if n <= last_rows.get(c, 99)}
        cur.execute(
            "INSERT INTO feature_snapshots (partition_date, data_version, feature_version,"
            " rows_per_customer, from_backfill, run_id) VALUES (%s, 'v', 'f', %s, false, 'r')",
            (day(n), json.dumps(rows)),
        )


def gate(cur, customer: str, run_key: str, passed: bool, holdout: str, reason: str) -> int:
    cur.execute(
        "INSERT INTO gate_results (run_key, customer, passed, reference, margin, holdout_window,"
        " rows_scored, reason) VALUES (%s, %s, %s, 'champion', 0.02, %s, 100, %s) RETURNING id",
        (run_key, customer, passed, holdout, reason),
    )
    return cur.fetchone()[0]


def champion(cur, customer: str, version: str, trained_to: int) -> int:
    """Deploy `version` trained on days up to `trained_to`; return the champion move's id."""
    run_key = f"rk-{customer}-{version}"
    verdict = gate(cur, customer, run_key, True, window(trained_to - 6, trained_to), "beat it")
    cur.execute(
        "INSERT INTO deployment_decisions (customer, version, run_key, decided_by, reason,"
        " gate_result_id) VALUES (%s, %s, %s, 'a test', 'why not', %s) RETURNING id",
        (customer, version, run_key, verdict),
    )
    decision = cur.fetchone()[0]
    cur.execute(
        "INSERT INTO rollouts (decision_id, customer, version, outcome, reason, finished_at)"
        " VALUES (%s, %s, %s, 'promoted', 'first deployment', now()) RETURNING id",
        (decision, customer, version),
    )
    rollout = cur.fetchone()[0]
    cur.execute(
        "INSERT INTO champion_moves (customer, to_version, decision_id, rollout_id)"
        " VALUES (%s, %s, %s, %s) RETURNING id",
        (customer, version, decision, rollout),
    )
    move = cur.fetchone()[0]
    cur.execute(
        "INSERT INTO serving_routes (customer, champion_version) VALUES (%s, %s)"
        " ON CONFLICT (customer) DO UPDATE SET champion_version = EXCLUDED.champion_version",
        (customer, version),
    )
    return move


@pytest.fixture
def world(app_db: str) -> str:
    """Twenty published days; each customer in one situation."""
    with transaction(app_db) as cur:
        for name in CUSTOMERS:
            cur.execute("INSERT INTO customers (name, added_by) VALUES (%s, 'test')", (name,))
        publish(cur, range(1, 21), {"stopped-co": 5})
        champion(cur, "fresh-co", "1", trained_to=15)
        champion(cur, "drift-co", "1", trained_to=15)
        cur.execute(
            "INSERT INTO retraining_decisions (customer, policy, reason, first_day, last_day,"
            " data_versions, snapshot_sha, decided_by) VALUES ('drift-co', 'schedule', 'x',"
            " %s, %s, '{}', 'sha', 'test') RETURNING id",
            (day(1), day(15)),
        )
        decision = cur.fetchone()[0]
        cur.execute(
            "INSERT INTO drift_alerts (customer, decision_id, feature, measure, threshold,"
            " recent_first, recent_last) VALUES ('drift-co', %s, 'price', 0.9, 0.5, %s, %s)",
            (decision, day(16), day(20)),
        )
        champion(cur, "stale-co", "1", trained_to=8)
        gate(cur, "stale-co", "rk-2", False, window(6, 12), "WAPE 0.30 vs 0.20")
        gate(cur, "stale-co", "rk-3", False, window(10, 16), "WAPE 0.31 vs 0.20")
        champion(cur, "stopped-co", "1", trained_to=5)
    return app_db


def test_each_customer_gets_the_verdict_its_situation_calls_for(world):
    verdicts = judge_freshness(world, list(CUSTOMERS))
    shown = {c: (v.severity, v.days_behind) for c, v in verdicts.items()}
    assert shown == {
        "fresh-co": ("fresh", 5),
        "drift-co": ("warn", 5),  # fresh by its lag, but a person must act
        "stale-co": ("warn", 12),  # more than schedule_days (7) behind
        "stopped-co": ("error", 15),  # more than twice that
        "new-co": ("warn", None),  # serves nothing yet
    }
    assert verdicts["fresh-co"].passed and not verdicts["stale-co"].passed
    drift = verdicts["drift-co"]
    assert "approve_drift_retraining" in drift.waiting_for_person
    assert "/locations/retrain_assets/jobs/approve_drift_retraining/playground" in drift.reason
    stale = verdicts["stale-co"].reason
    assert f"every candidate since day {day(12)} failed its gate (2; latest: WAPE 0.31" in stale
    assert f"trained on days up to {day(8)}: 12 published day(s) behind" in stale
    assert f"no rows for stopped-co since {day(5)}" in verdicts["stopped-co"].reason
    assert verdicts["new-co"].reason.startswith("no model serves new-co yet (20 published day(s)")
    assert verdicts["stopped-co"].metadata()["published_days_behind"] == 15


def test_a_rolled_back_challenger_and_a_failed_training_are_named(world):
    with transaction(world) as cur:
        cur.execute("SELECT id FROM deployment_decisions WHERE customer = 'fresh-co'")
        decision = cur.fetchone()[0]
        cur.execute(
            "INSERT INTO deployment_decisions (customer, version, run_key, decided_by, reason,"
            " gate_result_id) SELECT customer, '2', 'rk-2', 'x', 'y', gate_result_id"
            " FROM deployment_decisions WHERE id = %s RETURNING id",
            (decision,),
        )
        second = cur.fetchone()[0]
        cur.execute(
            "INSERT INTO rollouts (decision_id, customer, version, outcome, reason)"
            " VALUES (%s, 'fresh-co', '2', 'rolled_back', 'canary WAPE 0.3 vs 0.2')",
            (second,),
        )
        cur.execute(
            "INSERT INTO machine_pointers (machine, customer, run_key, state, status, reason)"
            " VALUES ('training', 'fresh-co', 'rk-9', 'FAILED', 'terminal', 'max retries')"
        )
    reason = judge_freshness(world, ["fresh-co"])["fresh-co"].reason
    assert "training rk-9 failed: max retries" in reason
    assert "its last challenger 2 was rolled back: canary WAPE 0.3 vs 0.2" in reason


@dataclass(frozen=True)
class Tick:
    """One evaluation of the sensor: its result, and what its in-process report run stored."""

    result: dg.SensorResult
    reported: dict[str, dg.AssetCheckEvaluation]  # by partition
    runs: int  # report runs it executed

    @property
    def materialized(self) -> list[str]:
        return [e.partition for e in self.result.asset_events]

    @property
    def reason(self) -> str:
        return self.result.skip_reason.skip_message if self.result.skip_reason else ""


def report_runs(instance: dg.DagsterInstance) -> list[str]:
    return [r.run_id for r in instance.get_runs(dg.RunsFilter(job_name=JOB_NAME))]


def evaluate(db: str, instance: dg.DagsterInstance) -> Tick:
    """Evaluate the `serving_report` sensor as the daemon does; store none of its events."""
    before = set(report_runs(instance))
    context = dg.build_sensor_context(
        instance=instance, resources={"project_db": ProjectDatabase(url=db)}
    )
    result = serving_report(context)
    assert isinstance(result, dg.SensorResult)
    assert not result.run_requests  # it reports in process, never by a run of its own
    runs = [r for r in report_runs(instance) if r not in before]
    reported = {
        record.event_log_entry.asset_check_evaluation.partition: (
            record.event_log_entry.asset_check_evaluation
        )
        for run in runs
        for record in instance.get_records_for_run(
            run, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ).records
    }
    for run in runs:
        assert instance.get_run_by_id(run).tags[REPORTER_TAG] == REPORTER
    return Tick(result, reported, len(runs))


def store(instance: dg.DagsterInstance, tick: Tick) -> None:
    """Do what the daemon does with a tick's result: store its materializations."""
    for event in tick.result.asset_events:
        instance.report_runless_asset_event(event)


def tick(db: str, instance: dg.DagsterInstance) -> Tick:
    evaluated = evaluate(db, instance)
    store(instance, evaluated)
    return evaluated


@pytest.fixture
def customers_instance(dagster_instance: dg.DagsterInstance) -> dg.DagsterInstance:
    dagster_instance.add_dynamic_partitions(CUSTOMER_PARTITIONS, list(CUSTOMERS))
    return dagster_instance


def test_a_lost_tick_is_said_again_and_a_stored_one_never(world, customers_instance):
    instance = customers_instance
    first = evaluate(world, instance)
    moved = ["drift-co", "fresh-co", "stale-co", "stopped-co"]
    # every champion move materialized; their verdicts wait for those materializations, and
    # new-co's (no model) is reported at once, in this tick's own report run
    assert first.materialized == moved and sorted(first.reported) == ["new-co"]
    assert first.runs == 1 and "reported in run" in first.reason
    # the daemon died after the tick returned: nothing of it stored, so the next tick says it all
    again = evaluate(world, instance)
    assert again.materialized == moved and again.reported == {} and again.runs == 0
    assert [e.metadata for e in again.result.asset_events] == [
        e.metadata for e in first.result.asset_events
    ]

    store(instance, again)
    by = evaluate(world, instance).reported
    assert sorted(by) == moved  # one report run: every moved customer's verdict
    assert by["stopped-co"].severity == dg.AssetCheckSeverity.ERROR
    assert by["stale-co"].severity == dg.AssetCheckSeverity.WARN and not by["stale-co"].passed
    assert by["fresh-co"].passed
    # aimed at the latest materialization: the UI shows the partition passed or failed
    infos = instance.event_log_storage.get_asset_check_partition_info([CHECK_KEY])
    assert sorted(i.partition_key for i in infos if i.is_current) == sorted(CUSTOMERS)

    quiet = evaluate(world, instance)
    assert (quiet.materialized, quiet.reported, quiet.runs) == ([], {}, 0)  # nothing twice
    assert "0 champion move(s) materialized, 0 verdict(s) to report" in quiet.reason

    with transaction(world) as cur:
        publish(cur, range(21, 22), {"stopped-co": 5})
    assert sorted(tick(world, instance).reported) == sorted(CUSTOMERS)  # a day later: all moved


def test_a_failed_report_is_said_on_the_tick_and_reported_again(
    world, customers_instance, monkeypatch
):
    instance = customers_instance
    tick(world, instance)

    def broken(*_args: object) -> None:
        raise RuntimeError("the check's storage refused it")

    monkeypatch.setattr(freshness_report, "check_evaluation", broken)
    failed = evaluate(world, instance)
    assert failed.runs == 1 and failed.reported == {}
    assert "FAILED" in failed.reason and "the check's storage refused it" in failed.reason
    monkeypatch.undo()
    assert len(evaluate(world, instance).reported) == len(CUSTOMERS) - 1  # new-co's stored


def test_a_report_run_left_unfinished_by_a_dead_code_server_is_marked_failed(
    customers_instance,
):
    instance = customers_instance
    orphan = instance.create_run_for_job(serving_freshness_job, tags={REPORTER_TAG: REPORTER})
    launched = instance.create_run_for_job(serving_freshness_job)  # a person's, from the UI
    assert fail_orphaned_reports(instance, time.time()) == []  # just created: alive
    later = time.time() + ORPHAN_AFTER_SECONDS + 1
    assert fail_orphaned_reports(instance, later) == [orphan.run_id]
    assert instance.get_run_by_id(orphan.run_id).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(launched.run_id).status == dg.DagsterRunStatus.NOT_STARTED
    assert fail_orphaned_reports(instance, later) == []


def test_a_partitions_second_and_third_verdicts_are_stored_and_shown(world, customers_instance):
    instance = customers_instance
    tick(world, instance)
    tick(world, instance)
    for version, trained_to in (("2", 19), ("3", 21)):
        with transaction(world) as cur:
            publish(cur, range(trained_to - 1, trained_to + 1), {"stopped-co": 5})
            champion(cur, "stale-co", version, trained_to=trained_to)
        moved = tick(world, instance)
        assert moved.materialized == ["stale-co"] and "stale-co" not in moved.reported
        assert moved.result.asset_events[0].metadata["version"].value == version
        judged = tick(world, instance).reported
        assert judged["stale-co"].passed
        assert judged["stale-co"].metadata["serving_version"].value == version
        assert evaluate(world, instance).runs == 0

    history = [
        r
        for r in instance.event_log_storage.get_asset_check_execution_history(CHECK_KEY, 50)
        if r.partition == "stale-co"
    ]
    versions = [r.event.asset_check_evaluation.metadata["serving_version"].value for r in history]
    assert versions == ["3", "2", "1"]  # newest first: three evaluations of one partition
    assert len({r.run_id for r in history}) == 3  # each in its own report run
    [info] = instance.event_log_storage.get_asset_check_partition_info(
        [CHECK_KEY], partition_keys=["stale-co"]
    )
    assert info.latest_planned_run_id == history[0].run_id and info.is_current  # "3" is shown


def test_status_prints_the_same_verdicts_and_what_waits_for_a_person(world):
    lines = serving_lines(world)
    assert lines[0].startswith("drift-co") and "WARNING" in lines[0]
    assert lines[1].startswith("    waits for a person: drift alert")
    assert any(line.startswith("stopped-co") and " ERROR " in line for line in lines)
    assert serving_lines(world, "fresh-co")[0].split()[:3] == ["fresh-co", "serving", "fresh"]
