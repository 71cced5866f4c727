"""Benchmark a single-run backfill of the data side: `sales` + `store_day_features` over N days.

Lands the tenants (the three demo tenants by default, or `--tenants N` synthetic ones of
`--stores` x `--items` series) for the days in a temporary RETRAIN_HOME, then runs, each in a
fresh child process:

- `dagster`: both assets over the whole range in ONE run (what `BackfillPolicy.single_run()`
  gives a backfill launched from the UI), in-process, on a Dagster instance whose storage is
  the embedded PostgreSQL through the project's pooled storage class (as `dagster.yaml`
  configures it; `--dagster-storage postgres` for dagster-postgres' own class, which opens a
  connection per query; `sqlite` for a temporary SQLite instance), the project tables on the
  same server;
- `plain`: the reference, the same computation as a plain script without Dagster (the same
  functions: validate every file, record the quarantine, write the sales days, read them
  back, compute and write the feature days, publish the snapshots).

Each mode reports wall time, CPU time (user + system of the child) and peak RSS (the child's
ru_maxrss: in-process execution, so the run's steps are that process). The ratio of the two
wall times is Dagster's overhead.

    .venv/bin/python benchmarks/bench_backfill.py
    .venv/bin/python benchmarks/bench_backfill.py --tenants 10 --stores 20 --items 50
    .venv/bin/python benchmarks/bench_backfill.py --days 90 --modes dagster --profile run.prof
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
from collections.abc import Callable
from pathlib import Path

FIRST = dt.date(2025, 1, 1)
# the storage class dagster.yaml names
POOLED_STORAGE = {
    "module": "retrain_assets.runtime.dagster_storage",
    "class": "PooledPostgresStorage",
}
COUNTRIES = ("US", "DE", "JP")


def _tenants(args: argparse.Namespace) -> tuple:
    from retrain_assets.demo.tenants import DEMO_TENANTS, TenantSpec

    if not args.tenants:
        return DEMO_TENANTS
    return tuple(
        TenantSpec(f"bench-{n:03d}", COUNTRIES[n % 3], args.stores, args.items, seed=100 + n)
        for n in range(args.tenants)
    )


def _days(args: argparse.Namespace) -> list[dt.date]:
    return [FIRST + dt.timedelta(days=i) for i in range(args.days)]


def _land(args: argparse.Namespace) -> None:
    from retrain_assets.demo.simulate import land_tenant
    from retrain_assets.settings import landing_root

    for spec in _tenants(args):
        land_tenant(landing_root(), spec, _days(args))


def _dagster_run(args: argparse.Namespace, server) -> Callable[[], None]:
    """Return the run, its code loaded (a run worker loads the code location before it runs)."""
    import dagster as dg

    from retrain_assets.customers import CUSTOMERS
    from retrain_assets.definitions import FEATURES_JOB, build_definitions
    from retrain_assets.store.server import ensure_database

    days = _days(args)
    overrides = None
    if args.dagster_storage == "postgres":
        dagster_db = ensure_database(server, "dagster")
        overrides = {"storage": {"postgres": {"postgres_url": dagster_db}}}
    elif args.dagster_storage == "pooled":  # what dagster.yaml configures
        dagster_db = ensure_database(server, "dagster")
        pooled = {**POOLED_STORAGE, "config": {"postgres_url": dagster_db}}
        overrides = {"storage": {"custom": pooled}}
    job = build_definitions().resolve_job_def(FEATURES_JOB)

    def run() -> None:
        with dg.instance_for_test(overrides=overrides) as instance:
            instance.add_dynamic_partitions(CUSTOMERS.name, [s.name for s in _tenants(args)])
            result = job.execute_in_process(
                instance=instance,
                tags={
                    "dagster/asset_partition_range_start": days[0].isoformat(),
                    "dagster/asset_partition_range_end": days[-1].isoformat(),
                },
            )
        assert result.success, "the backfill run failed"

    return run


def _plain_run(args: argparse.Namespace, app_db: str) -> Callable[[], None]:
    """Return the same computation as the run, as a plain script: the reference."""
    from retrain_assets.features.feature_math import SERIES
    from retrain_assets.features.landing_outcomes import record_outcome_days
    from retrain_assets.features.lookback import LOOKBACK_DAYS
    from retrain_assets.features.parquet_store import ParquetPartitionStore
    from retrain_assets.features.sales_asset import accepted_rows, validate_days
    from retrain_assets.features.store_day_features_asset import write_feature_days
    from retrain_assets.landing import read_manifest_country
    from retrain_assets.settings import landing_root, storage_root
    from retrain_assets.store.snapshots import publish_snapshots

    keys = [day.isoformat() for day in _days(args)]
    customers = [spec.name for spec in _tenants(args)]
    root, store = landing_root(), ParquetPartitionStore(storage_root())
    first = FIRST - dt.timedelta(days=LOOKBACK_DAYS)
    wanted = [(first + dt.timedelta(days=i)).isoformat() for i in range(LOOKBACK_DAYS)] + keys

    def run() -> None:
        # sales
        outcomes = validate_days(root, customers, keys)
        days = {dt.date.fromisoformat(k): o for k, o in outcomes.items()}
        record_outcome_days(app_db, days, "plain-run")
        store.write_days("sales", keys, accepted_rows(outcomes))
        del outcomes, days
        # store_day_features: its input is the range and the 28 days before it, as present
        sales = store.read_present("sales", wanted, SERIES)  # as the run's IO manager does
        countries = {c: read_manifest_country(root, c) for c in customers}
        records, _ = write_feature_days(sales, keys, countries, store, "plain-run", None)
        publish_snapshots(app_db, records)

    return run


def child(args: argparse.Namespace) -> None:
    """Run one mode in this process and print its figures as JSON on the last line."""
    from retrain_assets.store.migrations import migrate
    from retrain_assets.store.server import ensure_database, start_server

    os.environ["RETRAIN_DB_PREFIX"] = f"bench_{args.child}_"
    os.environ["RETRAIN_STORAGE_URL"] = str(Path(os.environ["RETRAIN_HOME"]) / args.child)
    server = start_server()
    app_db = ensure_database(server, "app")
    os.environ["RETRAIN_APP_PG_URL"] = app_db
    migrate(app_db)
    run = _dagster_run(args, server) if args.child == "dagster" else _plain_run(args, app_db)
    profile = None
    if args.profile:
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"wall": wall, "cpu": cpu, "rss_mib": rss}))


def main() -> None:
    """Land the data, run each mode in a child process, print a results table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--tenants", type=int, default=0, help="0: the three demo tenants")
    parser.add_argument("--stores", type=int, default=20)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--modes", default="dagster,plain")
    parser.add_argument(
        "--dagster-storage", choices=("pooled", "postgres", "sqlite"), default="pooled"
    )
    parser.add_argument("--profile", help="write a cProfile of the (single) mode here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    home = Path(tempfile.mkdtemp(prefix="bench-backfill-"))
    os.environ["RETRAIN_HOME"] = str(home)
    os.environ.pop("RETRAIN_LANDING_URL", None)
    os.environ.pop("RETRAIN_PG_URL", None)
    started = time.perf_counter()
    _land(args)
    landed = time.perf_counter() - started
    tenants = _tenants(args)
    series = sum(spec.stores * spec.items for spec in tenants)
    results = {}
    for mode in args.modes.split(","):
        done = subprocess.run(
            [sys.executable, __file__, *sys.argv[1:], "--child", mode],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.exit(f"mode {mode} failed (exit {done.returncode}):\n{done.stderr[-6000:]}")
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    load = os.getloadavg()[0]
    print(
        f"single-run backfill: {args.days} days x {series:,} series ({len(tenants)} tenants, "
        f"about {args.days * series:,} rows); Dagster storage {args.dagster_storage}; "
        f"load average {load:.1f}"
    )
    print(f"land the CSV files (not part of the run): {landed:.1f} s")
    print("| mode | wall s | per day ms | CPU s | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|")
    for mode, r in results.items():
        per_day = 1000 * r["wall"] / args.days
        print(f"| {mode} | {r['wall']:.1f} | {per_day:.0f} | {r['cpu']:.1f} | {r['rss_mib']:.0f} |")
    if {"dagster", "plain"} <= results.keys():
        ratio = results["dagster"]["wall"] / results["plain"]["wall"]
        print(f"Dagster / plain (wall): {ratio:.2f}x")


if __name__ == "__main__":
    main()
