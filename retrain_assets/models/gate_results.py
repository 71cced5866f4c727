"""The evaluation gate's verdicts, kept per run key in the project database.

Dagster blocks a failing check's downstream assets only inside the run that evaluated it; a
later run that targets `registered_model` alone reads the verdict from here instead, so a
candidate that never passed can never be registered by going around the check.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from retrain_assets.store.database import one_row, transaction


@dataclass(frozen=True)
class GateResult:
    """One evaluation of one candidate (a retried run evaluates again and appends)."""

    run_key: str
    customer: str
    passed: bool
    candidate_wape: float | None
    reference_wape: float | None
    reference: str
    champion_version: str | None
    margin: float
    holdout_window: str
    rows_scored: int
    reason: str
    dagster_run_id: str | None = None
    reference_version: str | None = None  # the registered version scored against, if any
    evaluated_at: dt.datetime | None = None
    gate: str = "beats_champion"  # or the deploy-time check, challenger_beats_champion_now
    model_version: str | None = None  # the registered version judged (deploy-time check)
    id: int | None = None


_COLUMNS = (
    "run_key, customer, passed, candidate_wape, reference_wape, reference, champion_version,"
    " margin, holdout_window, rows_scored, reason, dagster_run_id, reference_version"
)
_READ = f"{_COLUMNS}, evaluated_at, gate, model_version, id"


def _finite(value: float | None) -> float | None:
    """Store NaN/inf (an unscorable forecast) as NULL: the reason says why."""
    return value if value is not None and math.isfinite(value) else None


def record_gate_result(url: str, result: GateResult) -> int:
    """Append one verdict; return its id."""
    with transaction(url) as cur:
        cur.execute(
            f"INSERT INTO gate_results ({_COLUMNS}, gate, model_version) VALUES"
            " (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (
                result.run_key,
                result.customer,
                result.passed,
                _finite(result.candidate_wape),
                _finite(result.reference_wape),
                result.reference,
                result.champion_version,
                result.margin,
                result.holdout_window,
                result.rows_scored,
                result.reason,
                result.dagster_run_id,
                result.reference_version,
                result.gate,
                result.model_version,
            ),
        )
        return int(one_row(cur)[0])


def latest_gate_result(url: str, run_key: str, gate: str = "beats_champion") -> GateResult | None:
    """Return the latest verdict of one gate for a run key, or None when it never evaluated it.

    Each gate keeps its own verdicts: a deploy-time failure of a registered version says
    nothing about whether its candidate passed registration.
    """
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_READ} FROM gate_results WHERE run_key = %s AND gate = %s"
            " ORDER BY id DESC LIMIT 1",
            (run_key, gate),
        )
        row = cur.fetchone()
    return GateResult(*row) if row else None


def latest_version_verdict(url: str, customer: str, version: str, gate: str) -> GateResult | None:
    """Return the latest verdict of one gate for a registered version of a customer's model."""
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_READ} FROM gate_results WHERE customer = %s AND model_version = %s"
            " AND gate = %s ORDER BY id DESC LIMIT 1",
            (customer, version, gate),
        )
        row = cur.fetchone()
    return GateResult(*row) if row else None
