"""Benchmark `customer_discovery`: one tick over a landing zone of N customer folders.

Per size N (setup not timed): a temporary landing zone with N customer folders, each holding
its manifest (`customer.json`, country US; the sensor reads it for every new customer), a
fresh project database on the embedded PostgreSQL and a Dagster instance on PostgreSQL.
Timed, each tick evaluated as the daemon evaluates it (`build_sensor_context`), with the peak
RSS of the tick (VmHWM reset before it):

- first tick: every folder is new (N customers registered, one partition request of N keys);
- the request applied to the instance (`add_dynamic_partitions`, what the daemon does with it);
- steady tick: every folder is a known partition, nothing to do;
- one new folder among the N.

    .venv/bin/python benchmarks/bench_discovery.py --sizes 1000,10000,100000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.peak_rss import peak_mib, reset_peak  # noqa: E402


def land(root: Path, names: list[str]) -> None:
    """Create each customer's folder with its manifest."""
    from retrain_assets.landing import MANIFEST

    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / MANIFEST).write_text('{"country": "US"}')


def tick(instance, url: str):
    """Evaluate the sensor once; return (seconds, peak MiB, result)."""
    import dagster as dg

    from retrain_assets.automation.customer_discovery import customer_discovery
    from retrain_assets.store.resource import ProjectDatabase

    context = dg.build_sensor_context(
        instance=instance, resources={"project_db": ProjectDatabase(url=url)}
    )
    reset_peak()
    started = time.perf_counter()
    result = customer_discovery(context)
    return time.perf_counter() - started, peak_mib(), result


def bench(server, size: int, work: Path) -> dict[str, float]:
    import dagster as dg

    from retrain_assets.customers import CUSTOMERS
    from retrain_assets.store.database import transaction
    from retrain_assets.store.migrations import migrate
    from retrain_assets.store.server import ensure_database

    os.environ["RETRAIN_DB_PREFIX"] = f"bd{uuid.uuid4().hex[:8]}_"
    url = ensure_database(server, "app")
    migrate(url)
    overrides = {"storage": {"postgres": {"postgres_url": ensure_database(server, "dagster")}}}
    root = work / f"landing-{size}"
    names = [f"c{i:06d}" for i in range(size)]
    land(root, names)
    os.environ["RETRAIN_LANDING_URL"] = str(root)
    row: dict[str, float] = {}
    with dg.instance_for_test(overrides=overrides) as instance:
        row["first"], row["first peak"], first = tick(instance, url)
        [request] = first.dynamic_partitions_requests
        assert len(request.partition_keys) == size, len(request.partition_keys)
        started = time.perf_counter()
        instance.add_dynamic_partitions(CUSTOMERS.name, list(request.partition_keys))
        row["apply"] = time.perf_counter() - started
        row["steady"], row["steady peak"], steady = tick(instance, url)
        assert not steady.dynamic_partitions_requests, steady
        land(root, ["newcomer"])
        row["one new"], row["one new peak"], one = tick(instance, url)
        assert list(one.dynamic_partitions_requests[0].partition_keys) == ["newcomer"]
    with transaction(url) as cur:
        cur.execute("SELECT count(*) FROM customers WHERE country = 'US'")
        assert cur.fetchone()[0] == size + 1
    shutil.rmtree(root)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-discovery-"))
    os.environ["RETRAIN_HOME"] = str(home)
    from retrain_assets.store.server import start_server

    server = start_server(home)
    try:
        print(
            "| customers | first tick (all new) | partitions added | steady tick "
            "| one new folder | tick peak RSS (first / steady / one new) |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        for size in (int(s) for s in args.sizes.split(",")):
            r = bench(server, size, home)
            print(
                f"| {size:,} | {r['first']:.2f} s | {r['apply']:.2f} s | {r['steady']:.2f} s "
                f"| {r['one new']:.2f} s | {r['first peak']:.0f} / {r['steady peak']:.0f} / "
                f"{r['one new peak']:.0f} MiB |",
                flush=True,
            )
        print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
