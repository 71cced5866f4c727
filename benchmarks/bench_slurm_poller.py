"""Benchmark the Slurm backend: the submit rate, and the poller's status call with N held jobs.

A one-node cluster is started under a temporary folder on free loopback ports (`start_cluster`,
MaxJobCount 50,000), N run keys are submitted held (`hold`: nothing trains; each is a real
pending job) through `SlurmBackend.submit`, so each submit pays what the platform's does (a
look-up of the key, the spec written to its folder, the REST submit, the job read back). Then
`statuses` for all N ids, the one call `gpu_job_poller` makes per tick on this backend, is
timed `--ticks` times, and the `GET /jobs` inside it alone.

    .venv/bin/python benchmarks/bench_slurm_poller.py --jobs 10000
    .venv/bin/python benchmarks/bench_slurm_poller.py --jobs 1000 --ticks 5
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def main() -> None:
    """Run the benchmark and print one JSON line of figures."""
    from retrain_assets.gpu.slurm.backend import SlurmBackend, SlurmJobOptions
    from retrain_assets.gpu.slurm.cluster import start_cluster
    from retrain_assets.gpu.slurm.cluster_config import PARTITION, ClusterPorts
    from retrain_assets.gpu.slurm.rest import SlurmRest

    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--ticks", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as folder:
        root = Path(folder)
        cluster = start_cluster(root / "cluster", ClusterPorts(_free_port(), _free_port()))
        try:
            options = SlurmJobOptions(partition=PARTITION, time_limit_minutes=5, hold=True)
            backend = SlurmBackend(SlurmRest(cluster.rest_url, timeout=120), root / "jobs", options)
            spec = {
                "customer": "bench",
                "dataset_url": (root / "never-read.parquet").as_uri(),
                "features": ["lag_7"],
            }
            started = time.perf_counter()
            ids = [backend.submit(f"k{index:015d}", spec).id for index in range(args.jobs)]
            submit_seconds = time.perf_counter() - started
            ticks = []
            for _ in range(args.ticks):
                began = time.perf_counter()
                found = backend.statuses(ids)
                ticks.append(time.perf_counter() - began)
                queued = sum(job.status.value == "queued" for job in found.values())
                if queued != len(ids):
                    raise RuntimeError("a held job was not reported queued")
            began = time.perf_counter()
            listed = backend.rest.jobs()
            listing = time.perf_counter() - began
            body = len(json.dumps(listed))
            backend.close()
        finally:
            cluster.stop()
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "submit_seconds": round(submit_seconds, 1),
                "submits_per_second": round(args.jobs / submit_seconds, 1),
                "status_call_seconds": [round(t, 2) for t in ticks],
                "status_call_median": round(statistics.median(ticks), 2),
                "get_jobs_seconds": round(listing, 2),
                "get_jobs_mb": round(body / 1e6, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
