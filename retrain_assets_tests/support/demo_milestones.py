"""The live demo's milestones, read from a running platform's databases with their own times.

What the README's "first ten minutes" promises a newcomer, each as the first moment the
platform recorded it: a simulated day's features published, a retraining decision, a GPU job
waiting with no run, a candidate gated pass and one gated fail, a version registered in
MLflow, a deployment, a drift alert, a canary promoted over a champion and one rolled back.
The live-demo system test waits on them and `benchmarks/demo_timeline.py` prints them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from retrain_assets.demo.tenants import DEFAULT_HISTORY_DAYS, DEFAULT_START

Query = Callable[[str, str], list[tuple]]  # (purpose, sql) -> rows

FIRST_SIMULATED_DAY = DEFAULT_START + dt.timedelta(days=DEFAULT_HISTORY_DAYS)

# milestone -> (database, SQL answering one row with the milestone's first time, or NULL)
MILESTONES: dict[str, tuple[str, str]] = {
    "landed history published": (
        "app",
        "SELECT min(published_at) FROM feature_snapshots",
    ),
    "simulated day published": (
        "app",
        f"SELECT min(published_at) FROM feature_snapshots "
        f"WHERE partition_date >= '{FIRST_SIMULATED_DAY}'",
    ),
    "decision recorded": ("app", "SELECT min(decided_at) FROM retraining_decisions"),
    "GPU job waiting (POLL_JOB)": (
        "app",
        "SELECT min(started_at) FROM machine_history "
        "WHERE machine = 'training' AND state = 'POLL_JOB'",
    ),
    "gate passed": (
        "app",
        "SELECT min(evaluated_at) FROM gate_results WHERE gate = 'beats_champion' AND passed",
    ),
    "gate failed": (
        "app",
        "SELECT min(evaluated_at) FROM gate_results WHERE gate = 'beats_champion' AND NOT passed",
    ),
    "version registered": (
        "mlflow",
        "SELECT to_timestamp(min(creation_time) / 1000.0) FROM model_versions",
    ),
    "deployed": ("app", "SELECT min(started_at) FROM rollouts"),
    "drift alert": ("app", "SELECT min(detected_at) FROM drift_alerts"),
    "canary promoted": (
        "app",
        "SELECT min(moved_at) FROM champion_moves WHERE from_version IS NOT NULL",
    ),
    "canary rolled back": (
        "app",
        "SELECT min(finished_at) FROM rollouts WHERE outcome = 'rolled_back'",
    ),
}


def reached(query: Query, started: dt.datetime) -> dict[str, float]:
    """Return the milestones reached so far, each as seconds after `started` (aware, UTC)."""
    times = {}
    for name, (purpose, sql) in MILESTONES.items():
        [(when,)] = query(purpose, sql)
        if when is not None:
            times[name] = (when - started).total_seconds()
    return times


def timeline(times: dict[str, float]) -> str:
    """Return the milestones as lines "  +m:ss  name", in the order they were reached."""
    return "\n".join(
        f"  +{int(s // 60)}:{int(s % 60):02d}  {name}"
        for name, s in sorted(times.items(), key=lambda item: item[1])
    )
