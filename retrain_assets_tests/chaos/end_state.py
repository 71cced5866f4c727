"""What a customer's runs left behind after a fault, and the promises the suite checks on it.

Per run key: GPU jobs (the service's own table), saved candidates, MLflow runs, registered
versions, the candidate runs the hand-off requested. Per customer: every machine terminal,
and the reason of every failure (a failed step's error, a terminal state's reason) printed by
`retrain-assets history CUSTOMER`, the operator's view.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets_tests.support.candidate_runs import FINISHED, candidate_runs
from retrain_assets_tests.support.platform import RunningPlatform, up_environment
from retrain_assets_tests.support.waiting import wait_until

CLI = str(Path(sys.executable).parent / "retrain-assets")
TERMINAL = {"DONE", "FAILED", "ROLLED_BACK"}


@dataclass(frozen=True)
class TrainingOutcome:
    """The end state of one customer's training run after a fault."""

    customer: str
    run_key: str
    state: str
    reason: str | None
    gpu_jobs: int
    gpu_runs: int  # worker runs of the job (a resume after a crash is a second one)
    candidates: int
    mlflow_runs: int
    versions: int
    gate_passed: bool | None
    candidate_runs: list[str]  # statuses of the hand-off's Dagster runs, oldest first

    def figures(self) -> str:
        """One line for the report: the counts per run key."""
        return (
            f"{self.customer}: {self.state}; GPU jobs {self.gpu_jobs} (worker runs "
            f"{self.gpu_runs}), candidates {self.candidates}, MLflow runs {self.mlflow_runs}, "
            f"versions {self.versions}, gate {self.gate_passed}, candidate runs "
            f"{self.candidate_runs}; reason: {self.reason}"
        )


def pointer(platform: RunningPlatform, machine: str, customer: str) -> tuple | None:
    """Return (state, status, run_key, reason) of the customer's machine, if it has one."""
    rows = platform.query(
        "app",
        "SELECT state, status, run_key, reason FROM machine_pointers"
        " WHERE machine = %s AND customer = %s",
        (machine, customer),
    )
    return rows[0] if rows else None


def wait_terminal(platform: RunningPlatform, machine: str, customer: str, seconds: float) -> None:
    """Wait until the customer's machine is in a terminal state."""
    wait_until(
        lambda: (pointer(platform, machine, customer) or ("",))[0] in TERMINAL,
        seconds,
        f"{customer}'s {machine} machine reaching a terminal state",
        interval=1.0,
        detail=lambda: "\n".join(history(platform, customer)[-15:]),
    )


def training_outcome(platform: RunningPlatform, customer: str) -> TrainingOutcome:
    """Read every count the promises speak of, for the customer's training run key."""
    state, _, key, reason = pointer(platform, "training", customer)
    jobs = platform.query(
        "gpu",
        "SELECT j.id, count(r.id) FROM jobs j LEFT JOIN job_runs r ON r.job_id = j.id"
        " WHERE j.idempotency_key = %s GROUP BY j.id",
        (key,),
    )
    candidates = platform.query(
        "app", "SELECT count(*) FROM model_candidates WHERE run_key = %s", (key,)
    )[0][0]
    verdict = platform.query(
        "app",
        "SELECT passed FROM gate_results WHERE run_key = %s AND gate = 'beats_champion'"
        " ORDER BY id DESC LIMIT 1",
        (key,),
    )
    registry = MlflowRegistry(platform.mlflow_url())
    # the hand-off's last run may still be running its last check after DONE was recorded
    wait_until(
        lambda: all(r["status"] in FINISHED for r in candidate_runs(platform, key)),
        120,
        f"the candidate runs of {key} ending",
    )
    return TrainingOutcome(
        customer=customer,
        run_key=key,
        state=state,
        reason=reason,
        gpu_jobs=len(jobs),
        gpu_runs=sum(count for _, count in jobs),
        candidates=candidates,
        mlflow_runs=len(registry.runs_of(customer, key)),
        versions=len(registry.versions_of(customer, key)),
        gate_passed=verdict[0][0] if verdict else None,
        candidate_runs=[r["status"] for r in reversed(candidate_runs(platform, key))],
    )


def history(platform: RunningPlatform, customer: str) -> list[str]:
    """Return `retrain-assets history CUSTOMER` as an operator sees it."""
    env = {**up_environment(platform.home, platform.port), **platform.environment()}
    done = subprocess.run(
        [CLI, "history", customer], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def assert_reasons_in_history(platform: RunningPlatform, customer: str) -> None:
    """Every failed step's error and every terminal reason is in `retrain-assets history`."""
    printed = "\n".join(history(platform, customer))
    errors = platform.query(
        "app",
        "SELECT DISTINCT error FROM machine_history WHERE customer = %s AND NOT ok",
        (customer,),
    )
    for (error,) in errors:
        assert error, f"{customer}: a failed step recorded no error"
        assert error in printed, f"{customer}: {error!r} not in its history:\n{printed}"
    reasons = platform.query(
        "app",
        "SELECT machine, state, reason FROM machine_pointers"
        " WHERE customer = %s AND status = 'terminal'",
        (customer,),
    )
    for machine, state, reason in reasons:
        if state in ("FAILED", "ROLLED_BACK"):
            assert reason, f"{customer}: {machine} ended {state} without a reason"
        missing = f"{customer}: {reason!r} not in its history:\n{printed}"
        assert not reason or reason in printed, missing


def assert_training_promises(outcome: TrainingOutcome) -> None:
    """One job, one candidate, one MLflow run, at most one version: per run key."""
    assert outcome.state in ("DONE", "FAILED"), outcome.figures()
    assert outcome.gpu_jobs == 1, outcome.figures()
    assert outcome.candidates <= 1 and outcome.mlflow_runs <= 1, outcome.figures()
    assert outcome.versions <= 1, outcome.figures()
    if outcome.state == "DONE":
        assert outcome.candidates == 1 and outcome.mlflow_runs == 1, outcome.figures()
        assert outcome.gate_passed is not None, outcome.figures()
        assert outcome.versions == (1 if outcome.gate_passed else 0), outcome.figures()
