"""Benchmark the Slurm backend: the submit rate, and the poller's status call with N held jobs.

A one-node cluster is started under a temporary folder on free loopback ports (`start_cluster`,
MaxJobCount 50,000). With `--foreign M`, another platform (a storage folder of its own, so its
jobs' comments name another platform) first submits M held jobs: a shared cluster's other
tenant. Then N run keys of ours are submitted held (`hold`: nothing trains; each is a real
pending job) through `SlurmBackend.submit`, so each submit pays what the platform's does (a
look-up of the key, the spec written to its folder, the REST submit, the job read back). Then
`statuses` for all N ids, the one call `gpu_job_poller` makes per tick on this backend, is
timed `--ticks` times, and the `GET /jobs` inside a listing alone.

`--asked 1,10,...` times `statuses` for the first k of our ids both ways, `--ticks` times
each, alternating: asked by id (`BY_ID_LIMIT` set to k) and by the one listing
(`BY_ID_LIMIT` set below k), whatever the backend's own limit would choose.

    .venv/bin/python benchmarks/bench_slurm_poller.py --jobs 10000
    .venv/bin/python benchmarks/bench_slurm_poller.py --foreign 10000 --jobs 500 \\
        --asked 1,10,50,100,500
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrain_assets.gpu.slurm.backend import SlurmBackend

SPEC_FEATURES = ["lag_7"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _load() -> list[float]:
    """Return the 1, 5 and 15 minute load averages, as `uptime` prints them."""
    return [round(value, 2) for value in os.getloadavg()]


def _submit_held(
    backend: SlurmBackend, prefix: str, count: int, root: Path
) -> tuple[list[str], float]:
    """Submit `count` held run keys through `backend.submit`; return their ids and the seconds."""
    spec = {
        "customer": "bench",
        "dataset_url": (root / "never-read.parquet").as_uri(),
        "features": SPEC_FEATURES,
    }
    started = time.perf_counter()
    ids = [backend.submit(f"{prefix}{index:015d}", spec).id for index in range(count)]
    return ids, time.perf_counter() - started


def _timed_tick(backend: SlurmBackend, ids: list[str]) -> float:
    """Time one `statuses` call; every job is held, so each must come back queued."""
    began = time.perf_counter()
    found = backend.statuses(ids)
    seconds = time.perf_counter() - began
    if sorted(found) != sorted(ids) or any(j.status.value != "queued" for j in found.values()):
        raise RuntimeError("a held job of ours was not reported queued")
    return seconds


def _with_limit(limit: int, call: Callable[[], float]) -> float:
    """Run `call` with the backend's `BY_ID_LIMIT` set to `limit`, then put it back."""
    from retrain_assets.gpu.slurm import backend as module

    kept = module.BY_ID_LIMIT
    module.BY_ID_LIMIT = limit
    try:
        return call()
    finally:
        module.BY_ID_LIMIT = kept


def _asked_both_ways(backend: SlurmBackend, ids: list[str], k: int, ticks: int) -> dict[str, Any]:
    """Time `statuses` for k of our ids by id and by the one listing, alternating."""
    asked = ids[:k]
    by_id, listing = [], []
    for _ in range(ticks):
        by_id.append(_with_limit(k, lambda: _timed_tick(backend, asked)))
        listing.append(_with_limit(k - 1, lambda: _timed_tick(backend, asked)))
    return {
        "k": k,
        "by_id_seconds": [round(t, 3) for t in by_id],
        "by_id_median": round(statistics.median(by_id), 3),
        "listing_seconds": [round(t, 3) for t in listing],
        "listing_median": round(statistics.median(listing), 3),
    }


def main() -> None:
    """Run the benchmark and print one JSON line of figures."""
    from retrain_assets.gpu.slurm.backend import SlurmBackend, SlurmJobOptions
    from retrain_assets.gpu.slurm.cluster import start_cluster
    from retrain_assets.gpu.slurm.cluster_config import PARTITION, ClusterPorts
    from retrain_assets.gpu.slurm.rest import SlurmRest

    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000, help="held jobs of ours")
    parser.add_argument("--foreign", type=int, default=0, help="held jobs of another platform")
    parser.add_argument("--asked", default="", help="batch sizes k timed by id and by listing")
    parser.add_argument("--ticks", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(k) for k in args.asked.split(",") if k]
    if any(not 0 < k <= args.jobs for k in sizes):
        parser.error("every --asked size must be between 1 and --jobs")
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as folder:
        root = Path(folder)
        cluster = start_cluster(root / "cluster", ClusterPorts(_free_port(), _free_port()))
        try:
            options = SlurmJobOptions(partition=PARTITION, time_limit_minutes=5, hold=True)
            rest = SlurmRest(cluster.rest_url, timeout=120)
            other = SlurmBackend(rest, root / "other-tenant", options)
            backend = SlurmBackend(rest, root / "jobs", options)
            _, foreign_seconds = _submit_held(other, "f", args.foreign, root)
            ids, submit_seconds = _submit_held(backend, "k", args.jobs, root)
            ticks = [_timed_tick(backend, ids) for _ in range(args.ticks)]
            asked = [_asked_both_ways(backend, ids, k, args.ticks) for k in sizes]
            began = time.perf_counter()
            listed = rest.jobs()
            listing = time.perf_counter() - began
            body = len(json.dumps(listed))
            backend.close()
        finally:
            cluster.stop()
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "foreign": args.foreign,
                "foreign_submit_seconds": round(foreign_seconds, 1),
                "submit_seconds": round(submit_seconds, 1),
                "submits_per_second": round(args.jobs / submit_seconds, 1),
                "status_call_seconds": [round(t, 2) for t in ticks],
                "status_call_median": round(statistics.median(ticks), 2),
                "asked": asked,
                "get_jobs_seconds": round(listing, 2),
                "get_jobs_jobs": len(listed),
                "get_jobs_mb": round(body / 1e6, 1),
                "load_before": load_before,
                "load_after": _load(),
            }
        )
    )


if __name__ == "__main__":
    main()
