"""Postgres going away under the real service: 503s, requeue from the checkpoint, the lock.

A restart needs a Postgres the test may stop, so the first test gets one of its own
(`restartable_postgres`); the second only ends the lock's session, on the shared server.
"""

import threading
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import requests

from retrain_assets.gpu.service.service_lock import SERVICE_LOCK_ID
from retrain_assets.store.server import PostgresServer, libpq_url, with_database
from retrain_assets_tests.gpu.restartable_postgres import restartable_postgres
from retrain_assets_tests.gpu.service_process import ServiceProcess, training_spec
from retrain_assets_tests.support.waiting import patience, wait_until

pytestmark = pytest.mark.system
LOCK_HOLDERS = (
    "SELECT pid, granted FROM pg_locks WHERE locktype = 'advisory' AND objid = %s"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def _gpu_db(server_url: str, service: ServiceProcess) -> str:
    return libpq_url(with_database(server_url, f"{service.db_prefix}gpu"))


def _lock_holders(db: str) -> list[tuple[int, bool]]:
    with psycopg2.connect(db) as conn, conn.cursor() as cur:
        cur.execute(LOCK_HOLDERS, (SERVICE_LOCK_ID,))
        rows = cur.fetchall()
    conn.close()
    return rows


def test_a_postgres_restart_requeues_the_running_job_from_its_checkpoint(
    tmp_path: Path, dataset: Path, baseline_sha256: str
) -> None:
    with restartable_postgres() as postgres:
        service = ServiceProcess(pg_url=postgres.url, home=tmp_path / "home", slots=1)
        service.start()
        try:
            slow = training_spec(dataset, faults={"slow_seconds_per_round": 0.2})
            job_id = service.submit("outage", slow).json()["id"]
            before = service.wait_for(job_id, lambda job: (job["last_checkpoint_round"] or 0) >= 10)
            assert before["status"] == "running"

            postgres.stop()
            seen: dict[str, Any] = {}

            def unhealthy() -> bool:
                answer = requests.get(f"{service.url}/healthz", timeout=10)
                seen.update(status=answer.status_code, body=answer.json())
                return answer.status_code == 503

            wait_until(unhealthy, 10, "/healthz answering 503", interval=0.1, detail=service.log)
            assert seen["body"]["status"] == "unavailable"
            assert seen["body"]["database"].startswith("unavailable: ")
            lookup = service.call("GET", f"/jobs/{job_id}")
            assert lookup.status_code == 503, lookup.text  # not a 500
            assert lookup.json()["detail"] == "database unavailable; retry later"

            postgres.start()
            done = service.wait_for(job_id, seconds=60)
            assert done["status"] == "succeeded", done
            assert done["attempt"] == 1  # an outage is not a failed attempt
            interrupted, resumed = done["runs"]
            assert interrupted["outcome"] == "interrupted"
            assert interrupted["error"].startswith("database unavailable")
            assert resumed["started_from_round"] >= before["last_checkpoint_round"] >= 10
            assert resumed["started_from_round"] % 10 == 0
            artifact = service.call("GET", f"/jobs/{job_id}/artifact").json()
            assert artifact["sha256"] == baseline_sha256  # resumed == never interrupted

            # The service took its lock back: nobody else can start on this database.
            gpu_db = _gpu_db(postgres.url, service)
            wait_until(lambda: any(g for _, g in _lock_holders(gpu_db)), 10, "lock re-taken")
            with psycopg2.connect(gpu_db) as conn, conn.cursor() as cur:
                cur.execute("SELECT pg_try_advisory_lock(%s)", (SERVICE_LOCK_ID,))
                assert cur.fetchone()[0] is False
            conn.close()
            health = service.call("GET", "/healthz", token=None).json()
            assert (health["status"], health["database"], health["service_lock"]) == (
                "ok",
                "ok",
                "held",
            )
            assert "worker crashed" not in service.log()
        finally:
            assert service.stop() == 0, service.log()


def test_a_service_whose_lock_another_took_stops_and_leaves_its_jobs_alone(
    pg_server: PostgresServer, tmp_path: Path, dataset: Path
) -> None:
    service = ServiceProcess(pg_url=pg_server.url, home=tmp_path / "home", slots=1)
    service.start()
    other = None
    try:
        slow = training_spec(dataset, faults={"slow_seconds_per_round": 0.2})
        job_id = service.submit("taken", slow).json()["id"]
        service.wait_for(job_id, lambda job: job["rounds_done"] >= 1)
        gpu_db = _gpu_db(pg_server.url, service)
        [(holder, _)] = _lock_holders(gpu_db)

        # Another "service" queues for the lock, then the service's session ends: Postgres
        # grants the lock to the queued session before the service can reconnect.
        other = psycopg2.connect(gpu_db)
        other.autocommit = True
        waiting = threading.Thread(
            target=lambda: other.cursor().execute("SELECT pg_advisory_lock(%s)", (SERVICE_LOCK_ID,))
        )
        waiting.start()
        wait_until(lambda: len(_lock_holders(gpu_db)) == 2, 10, "a second session queued")
        with psycopg2.connect(gpu_db) as admin, admin.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", (holder,))
        admin.close()
        waiting.join(patience(10))
        assert not waiting.is_alive()

        assert service.process is not None
        exit_code = service.process.wait(patience(30))
        assert exit_code == 1, service.log()
        assert "another GPU service took this database's lock" in service.log()
        with psycopg2.connect(gpu_db) as conn, conn.cursor() as cur:
            cur.execute("SELECT status, error FROM jobs WHERE id = %s", (job_id,))
            assert cur.fetchone() == ("running", None)  # left for the lock's new owner
            cur.execute("SELECT outcome FROM job_runs WHERE job_id = %s", (job_id,))
            assert cur.fetchall() == [(None,)]
        conn.close()
    finally:
        if other is not None:
            other.close()
        service.stop()
