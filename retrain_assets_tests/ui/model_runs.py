"""The model side of a journey read from the platform: run keys, the poller's runs, verdicts.

What the browser shows is compared with these: the project's tables and Dagster's GraphQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from retrain_assets_tests.support.candidate_runs import FINISHED, candidate_runs
from retrain_assets_tests.support.platform import RunningPlatform
from retrain_assets_tests.support.waiting import wait_until


@dataclass(frozen=True)
class Verdict:
    """A row of gate_results: what beats_champion decided for one run key."""

    passed: bool
    reason: str
    reference: str
    dagster_run_id: str


def training_run_key(platform: RunningPlatform, customer: str) -> str:
    """Return the run key the customer's training machine works on (set by training_job)."""
    rows = platform.query(
        "app",
        "SELECT run_key FROM machine_pointers WHERE machine = 'training' AND customer = %s",
        (customer,),
    )
    assert rows, f"{customer} has no training machine: training_job never ran for it"
    return rows[0][0]


def candidate_run(platform: RunningPlatform, run_key: str) -> dict | None:
    """Return the gpu_job_poller's latest candidate run for a run key (id and status), if any.

    The hand-off requests `candidate-<run key>-<attempt>` and tags every attempt with the run
    key; the newest attempt is the one that counts (runs come newest first).
    """
    runs = candidate_runs(platform, run_key)
    return runs[0] if runs else None


def wait_for_candidate_run(platform: RunningPlatform, run_key: str, seconds: float) -> str:
    """Wait until the poller has requested the run key's candidate run; return its id."""
    wait_until(
        lambda: candidate_run(platform, run_key),
        seconds,
        f"gpu_job_poller requesting the candidate run of {run_key}",
    )
    return candidate_run(platform, run_key)["runId"]


def wait_for_candidate_run_end(platform: RunningPlatform, run_key: str, seconds: float) -> str:
    """Wait until the run key's candidate run has finished; return its status."""
    wait_for_candidate_run(platform, run_key, seconds)
    wait_until(
        lambda: candidate_run(platform, run_key)["status"] in FINISHED,
        seconds,
        f"the candidate run of {run_key} finishing",
    )
    return candidate_run(platform, run_key)["status"]


def verdict(platform: RunningPlatform, run_key: str) -> Verdict:
    """Return the latest gate verdict recorded for a run key."""
    rows = platform.query(
        "app",
        "SELECT passed, reason, reference, dagster_run_id FROM gate_results "
        "WHERE run_key = %s AND gate = 'beats_champion' ORDER BY id DESC LIMIT 1",
        (run_key,),
    )
    assert rows, f"no gate verdict for {run_key}"
    return Verdict(*rows[0])
