"""Benchmark `serving_report`: every customer's freshness judged, and what changed reported.

Per size N (setup not timed): a fresh project database on the embedded PostgreSQL in a
temporary RETRAIN_HOME, DAYS published days whose snapshot records name every customer, and
for every customer a champion as the platform records one (a passing `beats_champion`
verdict, a decision, a promoted rollout, a champion move, a serving route) trained on the days
up to a week ago. Timed, as the sensor's tick runs them:
- judge: `judge_freshness` for all N customers (the grouped queries and the verdicts);
- first report: what Dagster does not show when it shows nothing yet (every champion
  materialized, every verdict to report: `unmaterialized`, `unreported`);
- steady report: the same verdicts once Dagster shows all of them (nothing to say: the usual
  tick). What Dagster shows is built in memory as `shown()` returns it: the event log's
  queries behind `shown()` are not timed here.
CPU seconds of this process are printed beside wall time (the queries' work is the server's).

    .venv/bin/python benchmarks/bench_serving_report.py
    .venv/bin/python benchmarks/bench_serving_report.py --sizes 1000,10000,100000
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

from psycopg2.extras import Json, execute_values

DAYS = 35
DAY0 = dt.date(2026, 1, 1)


def seed(url: str, names: list[str]) -> None:
    """Customers, published days and one recorded champion per customer, in bulk."""
    from retrain_assets.store.database import transaction
    from retrain_assets.store.migrations import migrate

    migrate(url)
    days = [DAY0 + dt.timedelta(days=n) for n in range(DAYS)]
    trained_to = days[-8]
    window = f"{trained_to - dt.timedelta(days=6)} .. {trained_to}"
    rows = Json({name: 100 for name in names})
    with transaction(url) as cur:
        execute_values(
            cur,
            "INSERT INTO customers (name, country, added_by) VALUES %s",
            [(name, "US", "bench") for name in names],
            page_size=10_000,
        )
        execute_values(
            cur,
            "INSERT INTO feature_snapshots (partition_date, data_version, feature_version,"
            " rows_per_customer, from_backfill, run_id) VALUES %s",
            [(d, f"v-{d}", "f1", rows, False, "bench") for d in days],
        )
        cur.execute(
            "INSERT INTO gate_results (run_key, customer, passed, reference, margin,"
            " holdout_window, rows_scored, reason, model_version)"
            " SELECT 'rk-' || name, name, true, 'seasonal naive', 0.02, %s, 700, 'beat it', '1'"
            " FROM unnest(%s::text[]) AS name",
            (window, names),
        )
        cur.execute(
            "INSERT INTO deployment_decisions (customer, version, run_key, decided_by, reason,"
            " gate_result_id) SELECT customer, '1', run_key, 'bench', 'bench', id"
            " FROM gate_results"
        )
        cur.execute(
            "INSERT INTO rollouts (decision_id, customer, version, outcome, reason, finished_at)"
            " SELECT id, customer, '1', 'promoted', 'first deployment', now()"
            " FROM deployment_decisions"
        )
        cur.execute(
            "INSERT INTO champion_moves (customer, to_version, decision_id, rollout_id)"
            " SELECT customer, version, decision_id, id FROM rollouts"
        )
        cur.execute(
            "INSERT INTO serving_routes (customer, champion_version)"
            " SELECT customer, to_version FROM champion_moves"
        )


def timed(work):
    """Return (result, wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def run_size(server, n: int) -> dict:
    from retrain_assets.automation.serving_report import materialization
    from retrain_assets.dagster_private import CheckTarget
    from retrain_assets.models.freshness import judge_freshness
    from retrain_assets.models.freshness_check import check_evaluation
    from retrain_assets.models.freshness_report import Shown, unmaterialized, unreported
    from retrain_assets.store.server import ensure_database

    os.environ["RETRAIN_DB_PREFIX"] = f"bs{uuid.uuid4().hex[:8]}_"
    url = ensure_database(server, "app")
    names = [f"c{i:06d}" for i in range(n)]
    seed(url, names)
    verdicts, judge, judge_cpu = timed(lambda: judge_freshness(url, names))

    def say(now: dict) -> tuple[list, list[str]]:
        moved = unmaterialized(verdicts, now)
        events = [materialization(c, s) for c in moved if (s := verdicts[c].serving)]
        return events, unreported(verdicts, now)

    (_events, stale), first, _ = timed(lambda: say({}))
    assert len(stale) == n, "a first tick left a verdict unsaid"
    shown = {}
    for i, customer in enumerate(names):
        target = CheckTarget(storage_id=i + 1, run_id="", timestamp=0.0)
        serving = verdicts[customer].serving
        shown[customer] = Shown(
            materialization=target,
            move_id=serving.move_id if serving else None,
            evaluation=check_evaluation(verdicts[customer], target),
        )
    (quiet, still), steady, _ = timed(lambda: say(shown))
    assert not quiet and not still, "a steady tick reported something"
    severities = {v.severity for v in verdicts.values()}
    return {
        "n": n,
        "judge": judge,
        "judge_cpu": judge_cpu,
        "first": first,
        "steady": steady,
        "severities": ",".join(sorted(severities)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated customer counts")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-serving-report-"))
    os.environ["RETRAIN_HOME"] = str(home)
    from retrain_assets.store.server import start_server

    server = start_server(home)
    try:
        print("| customers | judge (wall) | judge (CPU) | first report | steady report |")
        print("|---:|---:|---:|---:|---:|")
        for n in (int(s) for s in args.sizes.split(",")):
            r = run_size(server, n)
            print(
                f"| {r['n']:,} | {r['judge']:.2f} s | {r['judge_cpu']:.2f} s "
                f"| {r['first']:.2f} s | {r['steady']:.3f} s |",
                flush=True,
            )
            print(f"  verdicts: {r['severities']}; load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
