"""Benchmark one day at platform scale: N customers' landing files through `sales` and features.

Prepares a temporary RETRAIN_HOME: each of `--customers` customers (countries US/DE/JP in
turn) lands one CSV file for day D with `--stores` x `--items` series, and the 28 days before D
already exist as `sales` partitions (written directly as Parquet: the look-back the features
read). Then, in a fresh child process, `features_job` runs for day D in-process (both steps in
that process, as the job's in-process executor runs them) on a Dagster instance stored in the
embedded PostgreSQL. Reported: the run's wall time, each step's time from its events, CPU time
and the child's peak RSS (ru_maxrss).

    .venv/bin/python benchmarks/bench_feature_day.py                      # 1,000 x 1,000
    .venv/bin/python benchmarks/bench_feature_day.py --customers 100 --profile day.prof
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

DAY = dt.date(2025, 3, 1)
COUNTRIES = ("US", "DE", "JP")
LOOKBACK = 28


def _names(args: argparse.Namespace) -> list[str]:
    return [f"cust-{n:04d}" for n in range(args.customers)]


def _series(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    stores = np.array([f"S{s + 1:03d}" for s in range(args.stores)], dtype=object)
    items = np.array([f"I{i + 1:04d}" for i in range(args.items)], dtype=object)
    return np.repeat(stores, args.items), np.tile(items, args.stores)


def prepare(args: argparse.Namespace) -> None:
    """Land day D's files and write the 28 earlier days of `sales` as Parquet partitions."""
    from retrain_assets.features.parquet_store import ParquetPartitionStore
    from retrain_assets.features.validation import SALES_COLUMNS, empty_sales
    from retrain_assets.landing import write_manifest
    from retrain_assets.settings import landing_root, storage_root

    rng = np.random.default_rng(0)
    root, names = landing_root(), _names(args)
    store_ids, item_ids = _series(args)
    per_file = len(store_ids)
    for n, name in enumerate(names):
        write_manifest(root, name, COUNTRIES[n % 3])
        frame = pd.DataFrame(
            {
                "date": DAY.isoformat(),
                "store_id": store_ids,
                "item_id": item_ids,
                "units_sold": rng.poisson(4.0, per_file),
                "price": np.round(rng.uniform(1.5, 25.0, per_file), 2),
                "on_promo": (rng.random(per_file) < 0.1).astype(int),
                "stock_on_hand": rng.integers(0, 40, per_file),
            }
        )
        frame.to_csv(Path(root) / name / f"{DAY.isoformat()}.csv", index=False)
    store = ParquetPartitionStore(storage_root())
    customers = np.repeat(np.array(names, dtype=object), per_file)
    rows = len(customers)
    for back in range(LOOKBACK, 0, -1):
        day = DAY - dt.timedelta(days=back)
        sales = pd.DataFrame(
            {
                "customer": customers,
                "date": np.full(rows, np.datetime64(day, "ns")),
                "store_id": np.tile(store_ids, args.customers),
                "item_id": np.tile(item_ids, args.customers),
                "units_sold": rng.poisson(4.0, rows).astype("int64"),
                "price": np.round(rng.uniform(1.5, 25.0, rows), 2),
                "on_promo": rng.random(rows) < 0.1,
                "stock_on_hand": rng.integers(0, 40, rows).astype("int64"),
            }
        )[SALES_COLUMNS]
        assert (sales.dtypes == empty_sales().dtypes).all()
        store.write("sales", day.isoformat(), sales)


def child(args: argparse.Namespace) -> None:
    """Run day D in this process; print the figures as JSON on the last line."""
    import dagster as dg

    from retrain_assets.customers import CUSTOMERS
    from retrain_assets.definitions import FEATURES_JOB, build_definitions
    from retrain_assets.store.migrations import migrate
    from retrain_assets.store.server import ensure_database, start_server

    server = start_server()
    app_db = ensure_database(server, "app")
    os.environ["RETRAIN_APP_PG_URL"] = app_db
    migrate(app_db)
    overrides = {"storage": {"postgres": {"postgres_url": ensure_database(server, "dagster")}}}
    job = build_definitions().resolve_job_def(FEATURES_JOB)
    with dg.instance_for_test(overrides=overrides) as instance:
        instance.add_dynamic_partitions(CUSTOMERS.name, _names(args))
        profile = None
        if args.profile:
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        wall, cpu = time.perf_counter(), time.process_time()
        result = job.execute_in_process(instance=instance, partition_key=DAY.isoformat())
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
        assert result.success, "the run failed"
        steps = {
            event.step_key: event.event_specific_data.duration_ms / 1000
            for event in result.all_events
            if event.event_type == dg.DagsterEventType.STEP_SUCCESS
        }
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"wall": wall, "cpu": cpu, "rss_mib": rss, "steps": steps}))


def main() -> None:
    """Prepare the day, run it in a child process (`--repeat` times), print a results table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--customers", type=int, default=1000)
    parser.add_argument("--stores", type=int, default=20)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", help="write a cProfile of the run here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    home = Path(tempfile.mkdtemp(prefix="bench-feature-day-"))
    os.environ["RETRAIN_HOME"] = str(home)
    for name in ("RETRAIN_LANDING_URL", "RETRAIN_STORAGE_URL", "RETRAIN_PG_URL"):
        os.environ.pop(name, None)
    started = time.perf_counter()
    prepare(args)
    prepared = time.perf_counter() - started
    runs = []
    for n in range(args.repeat):
        os.environ["RETRAIN_DB_PREFIX"] = f"bench_day{n}_"
        done = subprocess.run(
            [sys.executable, __file__, *sys.argv[1:], "--child"],
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    series = args.customers * args.stores * args.items
    print(
        f"one day ({DAY}) through sales + store_day_features: {args.customers:,} customers x "
        f"{args.stores * args.items:,} series = {series:,} rows in {args.customers:,} files, "
        f"28 look-back days of sales ({LOOKBACK * series:,} rows) present; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"prepare (not part of the run): {prepared:.1f} s")
    print("| run | wall s | sales step s | store_day_features step s | CPU s | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    for n, r in enumerate(runs, 1):
        steps = r["steps"]
        print(
            f"| {n} | {r['wall']:.1f} | {steps.get('sales', 0):.1f} | "
            f"{steps.get('store_day_features', 0):.1f} | {r['cpu']:.1f} | {r['rss_mib']:.0f} |"
        )


if __name__ == "__main__":
    main()
