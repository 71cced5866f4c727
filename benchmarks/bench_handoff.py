"""Benchmark `gpu_job_poller`'s hand-off: one tick with N customers in AWAIT_CANDIDATE/AWAIT_GATE.

Per size N (setup not timed): fresh `app` and `dagster` databases on the embedded PostgreSQL
in a temporary RETRAIN_HOME (or RETRAIN_PG_URL), a Postgres-backed Dagster instance, and N
customers `h00001`... whose training machine waits in the hand-off (pointer rows written in
one statement) with one candidate run each recorded in the instance (tags as the sensor
requests them). Three situations are timed, one tick each (`gpu_job_poller` with
`build_sensor_context`; no customer is in POLL_JOB, so no GPU call is made):

1. waiting: every candidate run STARTED (the steady state: a visit each, nothing requested);
2. failed: every run FAILURE (every customer asks for its next attempt: N requests, and the
   error of each failed run is read from the event log);
3. recorded: every run SUCCESS with a passing verdict in `gate_results` and a
   `registered_model` materialization (every machine ends DONE).

    .venv/bin/python benchmarks/bench_handoff.py
    .venv/bin/python benchmarks/bench_handoff.py --sizes 100,1000,5000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def setup(server: Any, n: int) -> tuple[str, Any, list[Any]]:
    """Return the app URL, a Postgres-backed instance and the N requests the tick would make."""
    import dagster as dg
    from psycopg2.extras import Json, execute_values

    from retrain_assets.automation.gpu_job_poller import candidate_request
    from retrain_assets.store.database import transaction
    from retrain_assets.store.migrations import migrate
    from retrain_assets.store.server import ensure_database

    os.environ["RETRAIN_DB_PREFIX"] = f"bh{uuid.uuid4().hex[:8]}_"
    app_url = ensure_database(server, "app")
    migrate(app_url)
    dagster_url = ensure_database(server, "dagster")
    overrides = {"storage": {"postgres": {"postgres_url": dagster_url}}}
    instance = dg.instance_for_test(overrides=overrides).__enter__()
    customers = [f"h{i:05d}" for i in range(1, n + 1)]
    payload = {"spec": {}, "job_id": "job", "handoff_attempt": 1, "handoff_tries": 1}
    with transaction(app_url) as cur:
        execute_values(
            cur,
            "INSERT INTO machine_pointers (machine, customer, run_key, state, status, payload)"
            " VALUES %s",
            [
                ("training", c, f"{c}-key", "AWAIT_GATE", "waiting", Json(payload))
                for c in customers
            ],
            page_size=1000,
        )
    requests = [candidate_request(c, f"{c}-key", 1) for c in customers]
    for request in requests:
        instance.add_run(
            dg.DagsterRun(
                job_name="__ASSET_JOB",
                run_id=str(uuid.uuid4()),
                status=dg.DagsterRunStatus.STARTED,
                tags={**request.tags, "dagster/partition": request.partition_key},
            )
        )
    return app_url, instance, requests


def tick(app_url: str, instance: Any) -> tuple[float, Any]:
    import dagster as dg

    from retrain_assets.automation.gpu_job_poller import gpu_job_poller
    from retrain_assets.features.parquet_store import PartitionStorage
    from retrain_assets.models.resources import GpuServiceResource
    from retrain_assets.store.resource import ProjectDatabase

    resources = {
        "project_db": ProjectDatabase(url=app_url),
        "gpu_service": GpuServiceResource(),
        "partition_storage": PartitionStorage(),
    }
    context = dg.build_sensor_context(instance=instance, resources=resources)
    started = time.perf_counter()
    result = gpu_job_poller(context)
    return time.perf_counter() - started, result


def set_status(instance: Any, status: Any) -> None:
    """Give every recorded run a new status (re-recorded under the same id and tags)."""
    import dagster as dg

    for run in instance.get_runs():
        instance.delete_run(run.run_id)
        instance.add_run(
            dg.DagsterRun(
                job_name=run.job_name,
                run_id=run.run_id,
                status=status,
                tags=run.tags,
            )
        )


def record_outcomes(app_url: str, instance: Any, requests: list[Any]) -> None:
    import dagster as dg
    from psycopg2.extras import execute_values

    from retrain_assets.store.database import transaction

    with transaction(app_url) as cur:
        execute_values(
            cur,
            "INSERT INTO gate_results (run_key, customer, passed, candidate_wape, reference_wape,"
            " reference, margin, holdout_window, rows_scored, reason) VALUES %s",
            [
                (
                    r.tags["retrain/run_key"],
                    r.partition_key,
                    True,
                    0.3,
                    0.36,
                    "seasonal naive",
                    0.02,
                    "w",
                    70,
                    "beats",
                )
                for r in requests
            ],
            page_size=1000,
        )
    for r in requests:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                asset_key="registered_model",
                partition=r.partition_key,
                metadata={"run_key": r.tags["retrain/run_key"], "version": "1"},
            )
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000")
    args = parser.parse_args()
    import dagster as dg

    from retrain_assets.store.server import start_server

    home = Path(tempfile.mkdtemp(prefix="bench-handoff-"))
    os.environ["RETRAIN_HOME"] = str(home)
    server = start_server(home)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        started = time.perf_counter()
        app_url, instance, requests = setup(server, n)
        setup_seconds = time.perf_counter() - started
        waiting, result = tick(app_url, instance)
        assert not result.run_requests, "a waiting tick requested runs"
        set_status(instance, dg.DagsterRunStatus.FAILURE)
        failed, result = tick(app_url, instance)
        assert len(result.run_requests) == n, len(result.run_requests)
        for request in result.run_requests:  # the daemon launched attempt 2; it succeeded
            instance.add_run(
                dg.DagsterRun(
                    job_name="__ASSET_JOB",
                    run_id=str(uuid.uuid4()),
                    status=dg.DagsterRunStatus.SUCCESS,
                    tags={**request.tags, "dagster/partition": request.partition_key},
                )
            )
        record_outcomes(app_url, instance, requests)
        recorded, _ = tick(app_url, instance)
        from retrain_assets.store.database import transaction

        with transaction(app_url) as cur:
            cur.execute("SELECT state, count(*) FROM machine_pointers GROUP BY state")
            states = dict(cur.fetchall())
        assert states == {"DONE": n}, states
        rows.append((n, setup_seconds, waiting, failed, recorded))
        print(
            f"  N={n}: waiting {waiting:.2f} s, failed {failed:.2f} s, recorded {recorded:.2f} s",
            flush=True,
        )
    print(
        "\n| N in the hand-off | setup (not timed) | waiting tick | all runs failed: N "
        "re-requests | all recorded: N DONE |"
    )
    print("|---|---|---|---|---|")
    for n, setup_seconds, waiting, failed, recorded in rows:
        print(
            f"| {n:,} | {setup_seconds:.0f} s | {waiting:.2f} s | {failed:.2f} s | "
            f"{recorded:.2f} s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
