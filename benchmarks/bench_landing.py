"""Benchmark `landing_arrivals`: one tick over N customers' landing folders.

Per size N (setup not timed): a temporary landing zone with N customer folders of DAYS daily
files each (empty files: the sensor only lists them, it never reads one), and an instance for
test holding the N customer partitions. Timed:
- the scan alone: one folder listing per customer (`scan_landing`);
- the first tick: every day is new, all of them are planned into one run request;
- a steady tick: the cursor already holds every day, nothing has changed;
- a tick after one customer's late file for a past day.
Each tick is the sensor evaluated as the daemon evaluates it (`build_sensor_context`), so it
includes reading the customer partitions, its own unfinished runs and the latest
materialization per partition of `sales` and `store_day_features`.

    .venv/bin/python benchmarks/bench_landing.py
    .venv/bin/python benchmarks/bench_landing.py --sizes 100,1000,10000 --days 120
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import tempfile
import time
from pathlib import Path

import dagster as dg
import psutil

DAY0 = dt.date(2026, 1, 1)


def land(root: Path, names: list[str], days: int) -> None:
    """Create every customer's folder and empty daily files, an hour old (settled)."""
    old = time.time() - 3600
    for name in names:
        folder = root / name
        folder.mkdir(parents=True)
        for offset in range(days):
            path = folder / f"{DAY0 + dt.timedelta(days=offset)}.csv"
            path.touch()
            os.utime(path, (old, old))


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def bench(size: int, days: int, work: Path) -> dict[str, float]:
    from retrain_assets.automation.landing_arrivals import landing_arrivals
    from retrain_assets.automation.landing_scan import scan_landing
    from retrain_assets.customers import CUSTOMERS

    root = work / f"landing-{size}"
    names = [f"c{i:06d}" for i in range(size)]
    land(root, names, days)
    os.environ["RETRAIN_LANDING_URL"] = str(root)
    row: dict[str, float] = {}
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(CUSTOMERS.name, names)
        files, row["scan"] = timed(lambda: scan_landing(str(root), names))
        assert len(files) == size * days
        first, row["first tick"] = timed(
            lambda: landing_arrivals(dg.build_sensor_context(instance=instance))
        )
        assert len(first.run_requests) == 1, first
        steady, row["steady tick"] = timed(
            lambda: landing_arrivals(
                dg.build_sensor_context(instance=instance, cursor=first.cursor)
            )
        )
        assert not steady.run_requests, steady
        late = root / names[size // 2] / f"{DAY0 + dt.timedelta(days=days // 2)}.csv"
        late.write_text("x\n")
        os.utime(late, (time.time() - 3600, time.time() - 3600))
        reread, row["late-file tick"] = timed(
            lambda: landing_arrivals(
                dg.build_sensor_context(instance=instance, cursor=first.cursor)
            )
        )
        assert len(reread.run_requests) == 1, reread
    row["rss GiB"] = psutil.Process().memory_info().rss / 2**30
    shutil.rmtree(root)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--days", type=int, default=120)
    args = parser.parse_args()
    os.environ["RETRAIN_LANDING_SETTLE_SECONDS"] = "30"
    with tempfile.TemporaryDirectory(prefix="bench-landing-") as work:
        print("| customers | files | scan | first tick | steady tick | late-file tick | RSS |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for size in (int(s) for s in args.sizes.split(",")):
            row = bench(size, args.days, Path(work))
            print(
                f"| {size:,} | {size * args.days:,} | {row['scan']:.2f} s | "
                f"{row['first tick']:.2f} s | {row['steady tick']:.2f} s | "
                f"{row['late-file tick']:.2f} s | {row['rss GiB']:.2f} GiB |",
                flush=True,
            )


if __name__ == "__main__":
    main()
