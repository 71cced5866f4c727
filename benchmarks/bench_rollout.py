"""Benchmark `rollout_controller`: one tick with N customers in a rollout.

Per size N (setup not timed): a fresh project database on the embedded PostgreSQL in a
temporary RETRAIN_HOME (or on RETRAIN_PG_URL); for every customer a deployment decision, its
rollout and the rollout machine's pointer in CANARY_10 (entered, route at 10 %); three
published `store_day_features` days with SERIES rows per customer (the actual sales); and in
`prediction_log`, per customer, CANARY_ROWS canary-served rows with their champion shadow rows
and twice as many champion-served rows on those days (what the service logs), written with COPY.

Then the work of a tick, `advance_rollouts` (what the sensor runs before mirroring analyses
into MLflow), timed in the three states a tick meets:
- waiting: every step inside its minimum time: one query, nobody advanced;
- analysing: every CANARY_10 step due (its start moved back): the step counts (one grouped
  query), the canary/shadow pairs (one query), each feature day read once, every analysis
  passing, N analyses + N routes + N history rows and pointers written with the chunks;
- no data: every CANARY_50 step due without a canary prediction yet: observed, a no-data
  interval each (a history row, the pointer).
The registry is a stub that counts calls: these ticks move no alias (a promotion's MLflow calls
are bounded by the tick's deadline, chunk by chunk). Mirroring the new analyses into MLflow is
one HTTP call per analysis after the advance, in what is left of the 40 s budget, not measured
here.

    .venv/bin/python benchmarks/bench_rollout.py
    .venv/bin/python benchmarks/bench_rollout.py --sizes 1000
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import datetime as dt
import io
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
from psycopg2.extras import Json, execute_values

STORES, ITEMS = 2, 10
SERIES = STORES * ITEMS
CANARY_ROWS = 10  # canary-routed request keys per customer (with shadow rows)
DAYS = [dt.date(2026, 3, 1) + dt.timedelta(days=i) for i in range(3)]
NOW = dt.datetime(2026, 3, 4, 12, 0, tzinfo=dt.UTC)
CPU: list[float] = []  # this process's CPU seconds per timed tick (the rest is Postgres, waits)


@dataclasses.dataclass
class CountingRegistry:
    calls: int = 0

    def set_canary(self, customer: str, version: str) -> None:
        self.calls += 1

    def remove_canary(self, customer: str) -> None:
        self.calls += 1

    def promote(self, customer: str, version: str, previous: str | None, decision_id: int) -> None:
        self.calls += 1


def customers(n: int) -> list[str]:
    return [f"c{i:05d}" for i in range(n)]


def write_days(storage: Path, names: list[str]) -> dict[dt.date, np.ndarray]:
    """Write each day's feature file; return the actual sales (customer-major) per day."""
    from retrain_assets.features.parquet_store import ParquetPartitionStore

    store = ParquetPartitionStore(str(storage))
    rng = np.random.default_rng(7)
    actuals = {}
    stores = np.tile(np.repeat([f"S{s:03d}" for s in range(STORES)], ITEMS), len(names))
    items = np.tile([f"I{i:04d}" for i in range(ITEMS)], STORES * len(names))
    for day in DAYS:
        sold = rng.integers(1, 40, SERIES * len(names)).astype(float)
        actuals[day] = sold
        store.write(
            "store_day_features",
            day.isoformat(),
            pd.DataFrame(
                {
                    "customer": np.repeat(names, SERIES),
                    "store_id": stores,
                    "item_id": items,
                    "date": pd.Timestamp(day),
                    "units_sold": sold,
                }
            ),
        )
    return actuals


def copy_rows(cur, table: str, columns: list[str], frame: pd.DataFrame) -> None:
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, header=False)
    buffer.seek(0)
    cur.copy_expert(f"COPY {table} ({', '.join(columns)}) FROM STDIN WITH (FORMAT csv)", buffer)


def seed(url: str, names: list[str], actuals: dict[dt.date, np.ndarray]) -> None:
    """Customers' decisions, rollouts, pointers in CANARY_10, routes, snapshots, the log."""
    from retrain_assets.store.database import transaction
    from retrain_assets.store.migrations import migrate

    migrate(url)
    n = len(names)
    with transaction(url) as cur:
        execute_values(
            cur,
            "INSERT INTO feature_snapshots (partition_date, data_version, feature_version,"
            " rows_per_customer, from_backfill, backfill_id, run_id) VALUES %s",
            [(d, f"v-{d}", "f1", Json({}), False, None, "bench") for d in DAYS],
        )
        cur.execute(
            "INSERT INTO gate_results (run_key, customer, passed, reference, margin,"
            " holdout_window, rows_scored, reason, gate) VALUES ('rk', 'bench', true, 'x', 0,"
            " '-', 1, 'bench', 'challenger_beats_champion_now') RETURNING id"
        )
        gate = cur.fetchone()[0]
        copy_rows(
            cur,
            "deployment_decisions",
            [
                "id",
                "customer",
                "version",
                "run_key",
                "decided_by",
                "reason",
                "gate_result_id",
                "previous_champion",
            ],
            pd.DataFrame(
                {
                    "id": range(1, n + 1),
                    "customer": names,
                    "version": "2",
                    "run_key": "rk",
                    "by": "bench",
                    "reason": "bench",
                    "gate": gate,
                    "prev": "1",
                }
            ),
        )
        copy_rows(
            cur,
            "rollouts",
            ["id", "decision_id", "customer", "version"],
            pd.DataFrame(
                {"id": range(1, n + 1), "d": range(1, n + 1), "customer": names, "version": "2"}
            ),
        )
        started = NOW.isoformat()
        payloads = [
            json.dumps(
                {
                    "rollout_id": i,
                    "decision_id": i,
                    "version": "2",
                    "champion": "1",
                    "step": "CANARY_10",
                    "weight": 0.1,
                    "canary_set": True,
                    "no_data_intervals": 0,
                    "step_started_at": started,
                }
            )
            for i in range(1, n + 1)
        ]
        copy_rows(
            cur,
            "machine_pointers",
            ["machine", "customer", "run_key", "state", "status", "payload", "visits"],
            pd.DataFrame(
                {
                    "m": "rollout",
                    "customer": names,
                    "k": [f"deploy-{i}" for i in range(1, n + 1)],
                    "state": "CANARY_10",
                    "status": "waiting",
                    "payload": payloads,
                    "visits": '{"START": 1, "CANARY_10": 1}',
                }
            ),
        )
        copy_rows(
            cur,
            "serving_routes",
            [
                "customer",
                "champion_version",
                "canary_version",
                "canary_weight",
                "rollout_id",
                "step",
            ],
            pd.DataFrame(
                {
                    "customer": names,
                    "ch": "1",
                    "ca": "2",
                    "w": 0.1,
                    "r": range(1, n + 1),
                    "s": "CANARY_10",
                }
            ),
        )
        copy_rows(
            cur,
            "prediction_log",
            [
                "customer",
                "model_version",
                "alias",
                "served",
                "request_key",
                "store_id",
                "item_id",
                "forecast_date",
                "prediction",
                "error",
                "rollout_id",
                "step",
                "served_at",
            ],
            prediction_log(names, actuals),
        )
        cur.execute("ANALYZE")


def prediction_log(names: list[str], actuals: dict[dt.date, np.ndarray]) -> pd.DataFrame:
    """Per customer: CANARY_ROWS canary + shadow rows, twice as many champion rows, 3 days."""
    frames = []
    n = len(names)
    per_day = -(-CANARY_ROWS // len(DAYS))
    for offset, day in enumerate(DAYS):
        sold = actuals[day].reshape(n, SERIES)
        for series in range(per_day * 3):  # first per_day series: canary, the rest: champion
            store, item = f"S{series // ITEMS:03d}", f"I{series % ITEMS:04d}"
            key = f"{store}/{item}/{day}"
            actual = sold[:, series]
            canary = series < per_day
            common = {
                "customer": names,
                "request_key": key,
                "store_id": store,
                "item_id": item,
                "forecast_date": day.isoformat(),
            }
            tail = {
                "error": None,
                "rollout_id": range(1, n + 1),
                "step": "CANARY_10",
                "served_at": (NOW + dt.timedelta(minutes=offset)).isoformat(),
            }
            if canary:
                frames.append(
                    pd.DataFrame(
                        {
                            **common,
                            "model_version": "2",
                            "alias": "canary",
                            "served": True,
                            "prediction": actual * 1.02,
                            **tail,
                        }
                    )
                )
                frames.append(
                    pd.DataFrame(
                        {
                            **common,
                            "model_version": "1",
                            "alias": "champion",
                            "served": False,
                            "prediction": actual * 1.10,
                            **tail,
                        }
                    )
                )
            else:
                frames.append(
                    pd.DataFrame(
                        {
                            **common,
                            "model_version": "1",
                            "alias": "champion",
                            "served": True,
                            "prediction": actual * 1.10,
                            **tail,
                        }
                    )
                )
    columns = [
        "customer",
        "model_version",
        "alias",
        "served",
        "request_key",
        "store_id",
        "item_id",
        "forecast_date",
        "prediction",
        "error",
        "rollout_id",
        "step",
        "served_at",
    ]
    return pd.concat(frames, ignore_index=True)[columns]


def move_steps_back(url: str, seconds: int) -> None:
    from retrain_assets.store.database import transaction

    earlier = (NOW - dt.timedelta(seconds=seconds)).isoformat()
    with transaction(url) as cur:
        cur.execute(
            "UPDATE machine_pointers SET payload = jsonb_set(payload, '{step_started_at}',"
            " to_jsonb(%s::text)) WHERE machine = 'rollout'",
            (earlier,),
        )


def timed_tick(url: str, storage: Path, settings, chunk: int) -> tuple[float, object, int]:
    from retrain_assets.deployment.advancing import advance_rollouts
    from retrain_assets.features.parquet_store import ParquetPartitionStore

    registry = CountingRegistry()
    started, cpu = time.perf_counter(), time.process_time()
    report = advance_rollouts(
        url,
        registry,
        ParquetPartitionStore(str(storage)),
        settings=settings,
        deadline=time.monotonic() + 30.0,
        clock=lambda: NOW,
        chunk=chunk,
    )
    CPU.append(time.process_time() - cpu)
    return time.perf_counter() - started, report, registry.calls


def count(url: str, sql: str) -> int:
    from retrain_assets.store.database import transaction

    with transaction(url) as cur:
        cur.execute(sql)
        return int(cur.fetchone()[0])


def run_size(server, n: int, home: Path, chunk: int) -> dict:
    from retrain_assets.deployment.rollout_settings import RolloutSettings
    from retrain_assets.store.server import ensure_database

    os.environ["RETRAIN_DB_PREFIX"] = f"br{uuid.uuid4().hex[:8]}_"
    url = ensure_database(server, "app")
    names = customers(n)
    storage = home / f"storage-{n}"
    began = time.perf_counter()
    actuals = write_days(storage, names)
    seed(url, names, actuals)
    setup = time.perf_counter() - began
    settings = RolloutSettings(
        step_seconds=1800,
        min_predictions=CANARY_ROWS,
        min_actuals=CANARY_ROWS,
        max_no_data_intervals=100,
    )
    waiting, report, calls = timed_tick(url, storage, settings, chunk)
    assert report.waiting == n and not report.results and calls == 0, report
    move_steps_back(url, 3600)
    analysing, report, calls = timed_tick(url, storage, settings, chunk)
    analysing_cpu = CPU[-1]
    moved = report.ended("CANARY_50")
    assert len(moved) == n and calls == 0, (len(moved), report.deferred[:3], report.problems)
    analyses = count(url, "SELECT count(*) FROM rollout_analyses WHERE passed")
    routes = count(url, "SELECT count(*) FROM serving_routes WHERE canary_weight = 0.5")
    move_steps_back(url, 3600)
    no_data, report, calls = timed_tick(url, storage, settings, chunk)
    assert report.observed == n and len(report.ended("CANARY_50")) == n, report.problems
    log_rows = count(url, "SELECT count(*) FROM prediction_log")
    return {
        "n": n,
        "setup": setup,
        "waiting": waiting,
        "analysing": analysing,
        "analysing_cpu": analysing_cpu,
        "no_data": no_data,
        "analyses": analyses,
        "routes": routes,
        "log_rows": log_rows,
        "rss_gib": psutil.Process().memory_info().rss / (1 << 30),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated customer counts")
    parser.add_argument("--chunk", type=int, default=None, help="customers per transaction")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    # Registered first, so it runs last: after pgserver has stopped the embedded server.
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["RETRAIN_HOME"] = str(home)
    from retrain_assets.deployment.advancing import CHUNK
    from retrain_assets.store.server import start_server

    server = start_server(home)
    print(f"chunk {args.chunk or CHUNK} customers per transaction")
    print(
        f"PostgreSQL: {'RETRAIN_PG_URL' if not server.embedded else 'embedded'}; "
        f"{os.cpu_count()} CPUs",
        flush=True,
    )
    print(
        "| customers in a rollout | prediction_log rows | setup (not timed) "
        "| waiting tick | analysing tick (all pass -> CANARY_50) | per customer "
        "| no-data tick | RSS |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        r = run_size(server, n, home, args.chunk or CHUNK)
        print(
            f"| {r['n']:,} | {r['log_rows']:,} | {r['setup']:.0f} s "
            f"| {r['waiting']:.2f} s | **{r['analysing']:.2f} s** "
            f"(CPU here {r['analysing_cpu']:.2f} s) "
            f"({r['analyses']:,} analyses, {r['routes']:,} routes at 50 %) "
            f"| {1000 * r['analysing'] / r['n']:.2f} ms | {r['no_data']:.2f} s "
            f"| {r['rss_gib']:.2f} GiB |",
            flush=True,
        )


if __name__ == "__main__":
    main()
