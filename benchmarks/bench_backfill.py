"""Benchmark a single-run backfill of the data side: `sales` + `store_day_features`, 365 days.

Lands the three demo tenants for a year in a temporary RETRAIN_HOME, then materializes both
assets over the whole range in ONE run (what `BackfillPolicy.single_run()` gives a backfill
launched from the UI) on the embedded PostgreSQL, and reports wall time and peak RSS.

    .venv/bin/python benchmarks/bench_backfill.py
    .venv/bin/python benchmarks/bench_backfill.py --days 90
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import tempfile
import time
from pathlib import Path

import dagster as dg

FIRST = dt.date(2025, 1, 1)


def main() -> None:
    """Land the data, run the range once, print a results table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=int, default=365)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-backfill-"))
    os.environ["RETRAIN_HOME"] = str(home)
    os.environ.pop("RETRAIN_LANDING_URL", None)
    os.environ.pop("RETRAIN_STORAGE_URL", None)

    from retrain_assets.customers import CUSTOMERS
    from retrain_assets.definitions import FEATURES_JOB, build_definitions
    from retrain_assets.demo.simulate import land_tenant
    from retrain_assets.demo.tenants import DEMO_TENANTS
    from retrain_assets.settings import landing_root
    from retrain_assets.store.server import ensure_database, start_server

    # what `up` exports and definitions.py reads (dg.EnvVar)
    os.environ["RETRAIN_APP_PG_URL"] = ensure_database(start_server(), "app")

    days = [FIRST + dt.timedelta(days=i) for i in range(args.days)]
    started = time.perf_counter()
    for spec in DEMO_TENANTS:
        land_tenant(landing_root(), spec, days)
    landed = time.perf_counter() - started
    series = sum(spec.stores * spec.items for spec in DEMO_TENANTS)

    job = build_definitions().resolve_job_def(FEATURES_JOB)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(CUSTOMERS.name, [s.name for s in DEMO_TENANTS])
        started = time.perf_counter()
        result = job.execute_in_process(
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": days[0].isoformat(),
                "dagster/asset_partition_range_end": days[-1].isoformat(),
            },
        )
        elapsed = time.perf_counter() - started
    assert result.success, "the backfill run failed"
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"single-run backfill: {args.days} days x {series} series ({len(DEMO_TENANTS)} tenants)")
    print("| measure | value |")
    print("|---|---|")
    print(f"| land the CSV files (not part of the run) | {landed:.1f} s |")
    print(f"| one run, sales + store_day_features | {elapsed:.1f} s |")
    print(f"| per day | {1000 * elapsed / args.days:.0f} ms |")
    print(f"| process max RSS | {rss_mib:.0f} MiB |")


if __name__ == "__main__":
    main()
