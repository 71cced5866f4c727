"""Benchmark the hand-off's latency: from a finished GPU job to its registered model, in pieces.

The whole platform runs (`retrain-assets up` in a temporary RETRAIN_HOME, the demo clock off,
`gpu_job_poller` every `--poll-interval` seconds, 10 by default as in the measurement of issue
14): the three demo tenants land their 120 days, `landing_arrivals` publishes the features,
`retraining_policy` decides, `training_job` submits, the GPU service trains. Nothing is timed
until a job has succeeded; from then on each demo customer's way to `registered_model` is read
back from what the platform recorded, so nothing of the benchmark sits in the measured path:

- the GPU job's `finished_at` (the GPU service's `jobs` table),
- the candidate run's events in the Dagster event log (`RUN_ENQUEUED` is the poller's request;
  `RUN_STARTING` the queue's launch, `RUN_START` the run worker's start; `STEP_START` /
  `STEP_SUCCESS` per step; `ASSET_MATERIALIZATION` of `registered_model`). Run events are
  stored under their old names (`PIPELINE_ENQUEUED`...), read back through `DagsterEventType`.

Each row is one customer's latest successful candidate run. Figures are seconds.

    .venv/bin/python benchmarks/bench_handoff_latency.py
    .venv/bin/python benchmarks/bench_handoff_latency.py --poll-interval 10 --timeout 1500
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the platform helpers live in the test package
    sys.path.insert(0, str(ROOT))

DEMO = ("northwind-us", "lindenhof-de", "sakura-jp")
CANDIDATE_STEP = "model_candidate"
GATE_STEP = "model_candidate_beats_champion"  # not the deploy-time challenger_beats_champion_now
PHASES = (
    ("to request", "job finished", "RUN_ENQUEUED"),
    ("queued and launched", "RUN_ENQUEUED", "RUN_STARTING"),  # the queue logs no dequeue event
    ("run worker start", "RUN_STARTING", "RUN_START"),
    ("model_candidate", "RUN_START", "model_candidate done"),
    ("beats_champion", "model_candidate done", "beats_champion done"),
    ("registered_model", "beats_champion done", "registered"),
)


def registered(platform) -> dict[str, float]:
    """Return customer -> epoch seconds of its `registered_model` materialization, if any."""
    rows = platform.query(
        "dagster",
        "SELECT partition, event FROM event_logs WHERE dagster_event_type ="
        " 'ASSET_MATERIALIZATION' AND asset_key LIKE %s",
        ('%"registered_model"%',),
    )
    return {partition: json.loads(event)["timestamp"] for partition, event in rows}


def candidate_runs(platform) -> dict[str, str]:
    """Return customer -> run id of its latest successful candidate run."""
    rows = platform.query(
        "dagster",
        "SELECT r.run_id, t.value FROM runs r JOIN run_tags t ON t.run_id = r.run_id"
        " JOIN run_tags a ON a.run_id = r.run_id AND a.key = 'retrain/handoff_attempt'"
        " WHERE t.key = 'customer' AND r.status = 'SUCCESS' ORDER BY r.id",
    )
    return {customer: run_id for run_id, customer in rows}


def run_events(platform, run_id: str) -> dict[str, float]:
    """Return the first time of each event of interest in a run (epoch seconds)."""
    import dagster as dg

    found: dict[str, float] = {}
    rows = platform.query(
        "dagster",
        "SELECT dagster_event_type, step_key, event FROM event_logs WHERE run_id = %s"
        " AND dagster_event_type IS NOT NULL ORDER BY id",
        (run_id,),
    )
    for stored, step, event in rows:
        kind = dg.DagsterEventType(stored).name  # run events are stored as PIPELINE_*
        at = json.loads(event)["timestamp"]
        found.setdefault(kind, at)
        if step:
            found.setdefault(f"{step} {kind}", at)
        if kind == "STEP_SUCCESS" and step == CANDIDATE_STEP:
            found.setdefault("model_candidate done", at)
        if kind == "STEP_SUCCESS" and step == GATE_STEP:
            found.setdefault("beats_champion done", at)
        if kind == "ASSET_MATERIALIZATION" and '"registered_model"' in event:
            found.setdefault("registered", at)
    return found


def job_finished(platform, customer: str, run_key: str) -> float:
    """Return when the customer's GPU job for `run_key` succeeded (epoch seconds)."""
    [(finished,)] = platform.query(
        "gpu",
        "SELECT extract(epoch FROM finished_at) FROM jobs WHERE customer = %s"
        " AND idempotency_key = %s AND status = 'succeeded'",
        (customer, run_key),
    )
    return float(finished)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poll-interval", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=1500.0)
    args = parser.parse_args()
    from retrain_assets_tests.support.platform import running_platform

    env = {
        "RETRAIN_DEMO_DAY_SECONDS": "0",
        "RETRAIN_POLL_INTERVAL_SECONDS": str(args.poll_interval),
    }
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="bench-handoff-latency-") as work,
        running_platform(Path(work), env=env) as platform,
    ):
        print(f"platform ready after {time.monotonic() - started:.0f} s", flush=True)
        # registered is not the end: the run's later steps (deploy) may still be running
        while not set(DEMO) <= set(registered(platform)) & set(candidate_runs(platform)):
            if time.monotonic() - started > args.timeout:
                print(f"timed out; registered: {sorted(registered(platform))}", flush=True)
                for run_id, kind, event in platform.query(
                    "dagster",
                    "SELECT run_id, dagster_event_type, event FROM event_logs WHERE"
                    " dagster_event_type IN ('STEP_FAILURE', 'RUN_FAILURE') ORDER BY id",
                ):
                    print(f"  {run_id} {kind}: {event[:1500]}")
                return 1
            time.sleep(2)
        print(f"all registered after {time.monotonic() - started:.0f} s", flush=True)
        rows = []
        for customer, run_id in sorted(candidate_runs(platform).items()):
            [(run_key,)] = platform.query(
                "dagster",
                "SELECT value FROM run_tags WHERE run_id = %s AND key = 'retrain/run_key'",
                (run_id,),
            )
            times = run_events(platform, run_id)
            times["job finished"] = job_finished(platform, customer, run_key)
            rows.append((customer, times))
    header = [name for name, _, _ in PHASES]
    print(f"\nload average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f}")
    print("| customer | " + " | ".join(header) + " | total: job finished -> registered |")
    print("|---" * (len(header) + 2) + "|")
    totals: dict[str, list[float]] = {name: [] for name in [*header, "total"]}
    for customer, times in rows:
        cells = []
        for name, start, end in PHASES:
            if start in times and end in times:
                value = times[end] - times[start]
                totals[name].append(value)
                cells.append(f"{value:.1f}")
            else:
                cells.append("-")
        total = times["registered"] - times["job finished"]
        totals["total"].append(total)
        print(f"| {customer} | " + " | ".join(cells) + f" | **{total:.1f}** |")
    medians = [f"{statistics.median(v):.1f}" if v else "-" for v in totals.values()]
    print("| median | " + " | ".join(medians[:-1]) + f" | **{medians[-1]}** |")
    for customer, times in rows:
        steps = {
            key: round(value - times["RUN_START"], 1)
            for key, value in sorted(times.items(), key=lambda item: item[1])
            if key.endswith(("STEP_WORKER_STARTING", "STEP_WORKER_STARTED", "STEP_START"))
            and "RUN_START" in times
        }
        print(f"  {customer} step events after RUN_START: {steps}")
        run_level = {
            key: round(value - times["job finished"], 1)
            for key, value in sorted(times.items(), key=lambda item: item[1])
            if key.startswith("RUN_")
        }
        print(f"  {customer} run events after the job finished: {run_level}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
