"""Step analyses mirrored into each decision's MLflow run, after the tick that recorded them.

`rollout_analyses` is the record; the MLflow run (opened by dagster-mlflow in the deployment
run) is where a person browsing MLflow sees the deploy-time scores and then every step's
analysis. Mirroring is one HTTP call per analysis, so it happens after the advance, within what
is left of the tick's budget; what is not mirrored yet is picked up by the next tick.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from mlflow.entities import Metric, RunTag
from mlflow.exceptions import MlflowException

from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.store.database import transaction

BATCH = 500
_GONE = {"RESOURCE_DOES_NOT_EXIST", "INVALID_STATE"}  # a deleted run: nothing to mirror into


@dataclass(frozen=True)
class MirrorReport:
    """What one call mirrored, what it could not, and what is left for the next one."""

    mirrored: int
    skipped: int
    left: bool
    error: str | None = None


def mirror_analyses(url: str, registry: MlflowRegistry, deadline: float) -> MirrorReport:
    """Log unmirrored analyses into their decisions' MLflow runs until done or the deadline."""
    mirrored = skipped = 0
    while time.monotonic() < deadline:
        batch = _unmirrored(url)
        if not batch:
            return MirrorReport(mirrored, skipped, left=False)
        done: list[int] = []
        for row in batch:
            if time.monotonic() >= deadline:
                break
            analysis_id, run_id, step, *values = row
            if run_id is None:
                skipped += 1
            else:
                try:
                    _log(registry, run_id, step, *values)
                    mirrored += 1
                except MlflowException as err:
                    if err.error_code not in _GONE:
                        _mark(url, done)
                        return MirrorReport(mirrored, skipped, left=True, error=str(err))
                    skipped += 1
            done.append(analysis_id)
        _mark(url, done)
    return MirrorReport(mirrored, skipped, left=True)


def _unmirrored(url: str) -> list[tuple]:
    with transaction(url) as cur:
        cur.execute(
            "SELECT a.id, d.mlflow_run_id, a.step, a.canary_requests, a.canary_errors,"
            " a.canary_nonfinite, a.rows_with_actuals, a.canary_wape, a.champion_wape,"
            " a.passed, a.reason, a.outcome, a.evidence, a.canary_coverage"
            " FROM rollout_analyses a JOIN rollouts r ON r.id = a.rollout_id"
            " JOIN deployment_decisions d ON d.id = r.decision_id"
            " WHERE a.mlflow_logged_at IS NULL ORDER BY a.id LIMIT %s",
            (BATCH,),
        )
        return cur.fetchall()


def _log(
    registry: MlflowRegistry,
    run_id: str,
    step: str,
    requests: int,
    errors: int,
    nonfinite: int,
    rows: int,
    canary_wape: float | None,
    champion_wape: float | None,
    passed: bool,
    reason: str,
    outcome: str | None = None,
    evidence: Mapping[str, object] | None = None,
    coverage: Mapping[str, float] | None = None,
) -> None:
    now = int(time.time() * 1000)
    numbers = {  # the evidence rule's rows needed and interval, where it judged
        f"evidence_{k}": v for k, v in (evidence or {}).items() if isinstance(v, int | float)
    }
    covered = {  # the canary's prediction intervals on its rows with actuals (part 4)
        f"coverage_{k}": v for k, v in (coverage or {}).items() if isinstance(v, int | float)
    }
    values = {
        **numbers,
        **covered,
        "canary_requests": requests,
        "canary_errors": errors,
        "canary_nonfinite": nonfinite,
        "rows_with_actuals": rows,
        "canary_wape": canary_wape,
        "champion_wape": champion_wape,
        "passed": 1.0 if passed else 0.0,
    }
    registry.client.log_batch(
        run_id,
        metrics=[
            Metric(f"{step}/{k}", float(v), now, 0) for k, v in values.items() if v is not None
        ],
        tags=[
            RunTag(f"{step}/verdict", reason[:5000]),
            RunTag(f"{step}/outcome", outcome or ("pass" if passed else "fail")),
        ],
    )


def _mark(url: str, ids: list[int]) -> None:
    if not ids:
        return
    with transaction(url) as cur:
        cur.execute(
            "UPDATE rollout_analyses SET mlflow_logged_at = clock_timestamp() WHERE id = ANY(%s)",
            (ids,),
        )
