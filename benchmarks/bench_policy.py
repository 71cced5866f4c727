"""Benchmark `retraining_policy`: one tick over N customers, each needing a drift measure.

Per size N (setup not timed): a fresh project database on the embedded PostgreSQL in a
temporary RETRAIN_HOME (or on RETRAIN_PG_URL), 35 published days of `store_day_features`
(parquet files with ROWS_PER_CUSTOMER rows per customer a day, snapshot records naming every
customer), and for every customer a decision already taken up by a run, whose window is the
first 28 days. Every customer is then in the policy's most expensive steady state: not busy,
schedule not due, 700 new rows (under the 1,000 threshold), 7 new days, so drift is measured.

The sensor is evaluated as the daemon evaluates it (`build_sensor_context`, an instance for
test holding the N customer partitions):
- tick 1 computes and stores every customer's training-window baseline (28 days read once);
- tick 2 and 3 read the stored baselines and only the 7 recent days.
Next to it, every customer's statistics over the 7 recent days taken the old way (each day
filtered once per customer, statistics from the rows) against `DayFrames` (each day reduced to
per-customer sums once, statistics added up from them for all customers at once).

    .venv/bin/python benchmarks/bench_policy.py
    .venv/bin/python benchmarks/bench_policy.py --sizes 100,1000,5000
"""

from __future__ import annotations

import argparse
import datetime as dt
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

try:
    from peak_rss import peak_mib, reset_peak
except ImportError:  # run as a module from the repository root
    from benchmarks.peak_rss import peak_mib, reset_peak

ROWS_PER_CUSTOMER = 100  # 5 stores x 20 items; --rows-per-customer changes it
OLD_WAY_UP_TO = 1000  # the old way took 588 s at 5,000 customers
WINDOW_DAYS, RECENT_DAYS = 28, 7
DAY0 = dt.date(2026, 1, 1)
DAYS = [DAY0 + dt.timedelta(days=n) for n in range(WINDOW_DAYS + RECENT_DAYS)]
INSTANCE_OVERRIDES: dict | None = None  # the Dagster instance on Postgres (set per size)
PEAKS: list[float] = []  # peak RSS of each tick, MiB (reset before it)
CPU: list[float] = []  # CPU seconds of this process in each tick (load-independent)


def customers(n: int) -> list[str]:
    return [f"c{i:05d}" for i in range(n)]


def write_days(storage: Path, names: list[str]) -> None:
    """Write every day's feature file: ROWS_PER_CUSTOMER stable rows per customer."""
    from retrain_assets.features.parquet_store import ParquetPartitionStore

    store = ParquetPartitionStore(str(storage))
    rng = np.random.default_rng(7)
    rows = len(names) * ROWS_PER_CUSTOMER
    for day in DAYS:
        frame = pd.DataFrame(
            {
                "customer": np.repeat(names, ROWS_PER_CUSTOMER),
                "rolling_mean_7": 10 + rng.normal(0, 2, rows),
                "rolling_mean_28": 10 + rng.normal(0, 2, rows),
                "price": 5 + rng.normal(0, 0.5, rows),
                "on_promo": rng.random(rows) < 0.1,
            }
        )
        store.write("store_day_features", day.isoformat(), frame)


def seed_database(url: str, names: list[str]) -> None:
    """Customers, snapshot records and one taken-up decision per customer, in bulk."""
    from retrain_assets.store.database import transaction
    from retrain_assets.store.migrations import migrate

    migrate(url)
    per_customer = {name: ROWS_PER_CUSTOMER for name in names}
    window = {d.isoformat(): f"v-{d.isoformat()}" for d in DAYS[:WINDOW_DAYS]}
    with transaction(url) as cur:
        execute_values(
            cur,
            "INSERT INTO customers (name, country, added_by) VALUES %s",
            [(name, "US", "bench") for name in names],
        )
        execute_values(
            cur,
            "INSERT INTO feature_snapshots (partition_date, data_version, feature_version,"
            " rows_per_customer, from_backfill, backfill_id, run_id) VALUES %s",
            [
                (d, f"v-{d.isoformat()}", "f1", Json(per_customer), False, None, "bench")
                for d in DAYS
            ],
        )
        execute_values(
            cur,
            "INSERT INTO retraining_decisions (customer, policy, reason, first_day, last_day,"
            " data_versions, snapshot_sha, decided_by, details, dagster_run_id) VALUES %s",
            [
                (
                    name,
                    "manual",
                    "bench",
                    DAYS[0],
                    DAYS[WINDOW_DAYS - 1],
                    Json(window),
                    "sha",
                    "bench",
                    Json({}),
                    f"run-{name}",
                )
                for name in names
            ],
        )


def tick(url: str, storage: Path, names: list[str]) -> tuple[float, str]:
    """Evaluate the sensor once; return seconds and the start of its skip reason."""
    import dagster as dg

    from retrain_assets.automation.retraining_policy import retraining_policy
    from retrain_assets.customers import CUSTOMERS
    from retrain_assets.features.parquet_store import PartitionStorage
    from retrain_assets.store.resource import ProjectDatabase

    with dg.instance_for_test(overrides=INSTANCE_OVERRIDES) as instance:
        if not instance.has_dynamic_partition(CUSTOMERS.name, names[-1]):
            instance.add_dynamic_partitions(CUSTOMERS.name, names)
        resources = {
            "project_db": ProjectDatabase(url=url),
            "partition_storage": PartitionStorage(base_url=str(storage)),
        }
        context = dg.build_sensor_context(instance=instance, resources=resources)
        reset_peak()
        started, cpu = time.perf_counter(), time.process_time()
        result = retraining_policy(context)
        seconds = time.perf_counter() - started
        PEAKS.append(peak_mib())
        CPU.append(time.process_time() - cpu)
    assert not result.run_requests, "the benchmark's customers should not be due"
    return seconds, result.skip_reason.skip_message if result.skip_reason else ""


def recent_reads(storage: Path, names: list[str]) -> tuple[float | None, float]:
    """Seconds for every customer's recent-day statistics: filtered per customer vs DayFrames.

    The first is what the policy did before: each day read once, then filtered once per
    customer and the statistics taken from that customer's rows.
    """
    from retrain_assets.features.parquet_store import ParquetPartitionStore
    from retrain_assets.policy.drift import DRIFT_FEATURES

    store = ParquetPartitionStore(str(storage))
    recent = DAYS[WINDOW_DAYS:]
    if len(names) > OLD_WAY_UP_TO:
        return None, _timed_day_frames(store, names, recent)
    started = time.perf_counter()
    days = {}
    for day in recent:
        with store.path("store_day_features", day.isoformat()).open("rb") as handle:
            days[day] = pd.read_parquet(handle, columns=["customer", *DRIFT_FEATURES])
    for name in names:
        rows = pd.concat([days[d][days[d]["customer"] == name] for d in recent])
        _ = {
            f: (rows[f].astype(float).mean(), rows[f].astype(float).std(ddof=0))
            for f in DRIFT_FEATURES
        }
    filtered = time.perf_counter() - started
    return filtered, _timed_day_frames(store, names, recent)


def _timed_day_frames(store, names: list[str], recent: list[dt.date]) -> float:
    from retrain_assets.policy.drift import DayFrames

    started = time.perf_counter()
    frames = DayFrames(store)
    for name in names:
        frames.stats(name, recent)
    return time.perf_counter() - started


def run_size(server, n: int, home: Path) -> dict:
    from retrain_assets.store.server import ensure_database

    global INSTANCE_OVERRIDES
    os.environ["RETRAIN_DB_PREFIX"] = f"bp{uuid.uuid4().hex[:8]}_"
    url = ensure_database(server, "app")
    INSTANCE_OVERRIDES = {
        "storage": {"postgres": {"postgres_url": ensure_database(server, "dagster")}}
    }
    PEAKS.clear()
    CPU.clear()
    names = customers(n)
    storage = home / f"storage-{n}"
    write_days(storage, names)
    seed_database(url, names)
    first, reason = tick(url, storage, names)
    rest = [tick(url, storage, names)[0] for _ in range(2)]
    filtered, split = recent_reads(storage, names)
    return {
        "n": n,
        "first": first,
        "steady": min(rest),
        "filtered": filtered,
        "split": split,
        "rss_gib": psutil.Process().memory_info().rss / (1 << 30),
        "peak_mib": max(PEAKS[1:]),
        "steady_cpu": min(CPU[1:]),
        "reason": reason[:90],
    }


def main() -> None:
    global ROWS_PER_CUSTOMER
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000", help="comma-separated customer counts")
    parser.add_argument("--rows-per-customer", type=int, default=ROWS_PER_CUSTOMER)
    args = parser.parse_args()
    ROWS_PER_CUSTOMER = args.rows_per_customer
    home = Path(tempfile.mkdtemp(prefix="bench-policy-"))
    os.environ["RETRAIN_HOME"] = str(home)
    from retrain_assets.store.server import start_server

    server = start_server(home)
    try:
        print(
            "| customers | tick 1 (baselines computed) | steady tick | per customer "
            "| recent stats, filtered per customer | DayFrames | RSS | steady tick peak RSS "
            "| steady tick CPU |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in (int(s) for s in args.sizes.split(",")):
            r = run_size(server, n, home)
            print(f"  load average {os.getloadavg()[0]:.1f}", flush=True)
            old = "not run" if r["filtered"] is None else f"{r['filtered']:.2f} s"
            print(
                f"| {r['n']:,} | {r['first']:.2f} s | {r['steady']:.2f} s "
                f"| {1000 * r['steady'] / r['n']:.2f} ms | {old} "
                f"| {r['split']:.2f} s | {r['rss_gib']:.2f} GiB | {r['peak_mib']:.0f} MiB "
                f"| {r['steady_cpu']:.2f} s |",
                flush=True,
            )
            print(f"  skip reason starts: {r['reason']}", flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
