"""Freshness per customer: the verdicts, their reasons, and what `serving_report` reports.

On a real project database: published days, champion moves, gate verdicts, rollouts and a
drift alert written as the platform writes them, one customer per situation.
"""

from __future__ import annotations

import datetime as dt
import json

import dagster as dg
import pytest

from retrain_assets.asset_keys import DEPLOYED_MODEL
from retrain_assets.automation.serving_report import latest_materializations, report_events
from retrain_assets.models.freshness import judge_freshness
from retrain_assets.runtime.serving_status import serving_lines
from retrain_assets.store.database import transaction

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


def tick(db: str, instance: dg.DagsterInstance, reported: dict) -> list:
    """One `serving_report` tick as the daemon runs it: judge, report, store the events."""
    verdicts = judge_freshness(db, list(CUSTOMERS))
    events, rows = report_events(verdicts, reported, latest_materializations(instance))
    for event in events:
        instance.report_runless_asset_event(event)
    reported.update({customer: (move, fingerprint) for customer, move, fingerprint in rows})
    return events


def test_a_champion_move_is_materialized_then_judged_and_each_change_said_once(
    world, dagster_instance
):
    reported: dict = {}
    first = tick(world, dagster_instance, reported)
    materialized = [e.partition for e in first if isinstance(e, dg.AssetMaterialization)]
    assert materialized == ["drift-co", "fresh-co", "stale-co", "stopped-co"]
    judged = [e.partition for e in first if isinstance(e, dg.AssetCheckEvaluation)]
    assert judged == ["new-co"]  # the others once their materialization has an id

    second = tick(world, dagster_instance, reported)
    by = {e.partition: e for e in second}
    assert sorted(by) == ["drift-co", "fresh-co", "stale-co", "stopped-co"]
    assert all(isinstance(e, dg.AssetCheckEvaluation) for e in second)
    assert by["stopped-co"].severity == dg.AssetCheckSeverity.ERROR
    assert by["stale-co"].severity == dg.AssetCheckSeverity.WARN and not by["stale-co"].passed
    assert by["fresh-co"].passed
    latest = dagster_instance.event_log_storage.get_latest_storage_id_by_partition(
        DEPLOYED_MODEL, dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    # aimed at the latest materialization: the UI shows the partition passed or failed
    key = dg.AssetCheckKey(DEPLOYED_MODEL, "serving_model_fresh")
    records = dagster_instance.event_log_storage.get_asset_check_execution_history(key, 20)
    aimed = {r.partition: r.event.dagster_event.event_specific_data for r in records}
    for customer, storage_id in latest.items():
        assert aimed[customer].target_materialization_data.storage_id == storage_id

    assert tick(world, dagster_instance, reported) == []  # nothing changed: nothing said

    with transaction(world) as cur:
        champion(cur, "stale-co", "2", trained_to=19)
    moved = tick(world, dagster_instance, reported)
    assert [(type(e).__name__, e.partition) for e in moved] == [
        ("AssetMaterialization", "stale-co")
    ]
    assert moved[0].metadata["version"].value == "2"
    assert moved[0].metadata["trained_to"].value == day(19).isoformat()
    [judged] = tick(world, dagster_instance, reported)
    assert judged.partition == "stale-co" and judged.passed


def test_status_prints_the_same_verdicts_and_what_waits_for_a_person(world):
    lines = serving_lines(world)
    assert lines[0].startswith("drift-co") and "WARNING" in lines[0]
    assert lines[1].startswith("    waits for a person: drift alert")
    assert any(line.startswith("stopped-co") and " ERROR " in line for line in lines)
    assert serving_lines(world, "fresh-co")[0].split()[:3] == ["fresh-co", "serving", "fresh"]
