"""`retraining_decisions`: every decision to train, with its reason and its snapshot.

A decision is the only thing that starts training, and each one is used by exactly one
`training_job` run (and its re-executions), so deployments can be matched one to one against
decisions. A decision nobody has launched yet is "open"; the table allows one open decision
per customer, so two evaluations of the policy can never decide twice for one customer.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

import psycopg2.errors
from psycopg2.extras import Json

from retrain_assets.store.database import one_row, transaction
from retrain_assets.store.snapshot_ref import SnapshotRef

Policy = Literal["schedule", "volume", "drift", "manual"]
_COLUMNS = """id, customer, policy, reason, first_day, last_day, data_versions, decided_by,
    details, decided_at, dagster_run_id"""


class DecisionRefused(ValueError):
    """A decision cannot be recorded or used as asked (named, with the reason)."""


@dataclass(frozen=True)
class Decision:
    """One recorded decision to train a customer on a snapshot."""

    id: int
    customer: str
    policy: str
    reason: str
    first_day: dt.date
    last_day: dt.date
    data_versions: dict[str, str]
    decided_by: str
    details: dict[str, Any]
    decided_at: dt.datetime
    dagster_run_id: str | None

    @property
    def snapshot(self) -> SnapshotRef:
        """Return the snapshot this decision chose."""
        return SnapshotRef(self.first_day, self.last_day, dict(self.data_versions))

    @property
    def run_key(self) -> str:
        """Return the Dagster run key of this decision's training request."""
        return f"decision-{self.id}"


def record_decision(
    url: str,
    customer: str,
    policy: Policy,
    reason: str,
    ref: SnapshotRef,
    decided_by: str,
    details: dict[str, Any] | None = None,
    dagster_run_id: str | None = None,
) -> Decision:
    """Append a decision; open (no run yet) unless `dagster_run_id` says which run uses it.

    Raises:
        DecisionRefused: the customer already has an open decision waiting for its run.
    """
    try:
        with transaction(url) as cur:
            cur.execute(
                f"""
                INSERT INTO retraining_decisions (customer, policy, reason, first_day, last_day,
                    data_versions, snapshot_sha, decided_by, details, dagster_run_id)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}
                """,
                (
                    customer,
                    policy,
                    reason,
                    ref.first_day,
                    ref.last_day,
                    Json(ref.data_versions),
                    ref.sha_for(customer),
                    decided_by,
                    Json(details or {}),
                    dagster_run_id,
                ),
            )
            decision = Decision(*one_row(cur))
            _resolve_alerts(cur, customer, decision.id)
            return decision
    except psycopg2.errors.UniqueViolation:
        open_one = open_decisions(url, customer)
        raise DecisionRefused(
            f"{customer} already has open decision "
            f"{open_one[0].id if open_one else '?'} waiting for its training run"
        ) from None


def _resolve_alerts(cur: Any, customer: str, decision_id: int) -> None:
    """A new decision answers any drift alert pending for the customer."""
    cur.execute(
        "UPDATE drift_alerts SET resolved_by = %s WHERE customer = %s AND resolved_by IS NULL",
        (decision_id, customer),
    )


def latest_decisions(url: str) -> dict[str, Decision]:
    """Return every customer's latest decision."""
    with transaction(url) as cur:
        cur.execute(
            f"SELECT DISTINCT ON (customer) {_COLUMNS} FROM retraining_decisions"
            " ORDER BY customer, id DESC"
        )
        return {row[1]: Decision(*row) for row in cur.fetchall()}


def open_decisions(url: str, customer: str | None = None) -> list[Decision]:
    """Return decisions not yet taken up by a run (optionally one customer's), oldest first."""
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_COLUMNS} FROM retraining_decisions WHERE dagster_run_id IS NULL"
            " AND (%s::text IS NULL OR customer = %s) ORDER BY id",
            (customer, customer),
        )
        return [Decision(*row) for row in cur.fetchall()]


def list_decisions(url: str, customer: str | None = None, limit: int = 50) -> list[Decision]:
    """Return the latest decisions, newest first."""
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_COLUMNS} FROM retraining_decisions"
            " WHERE (%s::text IS NULL OR customer = %s) ORDER BY id DESC LIMIT %s",
            (customer, customer, limit),
        )
        return [Decision(*row) for row in cur.fetchall()]


def mark_launched(url: str, launched: dict[int, str]) -> None:
    """Record which Dagster run took up each open decision (found by its tag)."""
    with transaction(url) as cur:
        for decision_id, run_id in launched.items():
            cur.execute(
                "UPDATE retraining_decisions SET dagster_run_id = %s"
                " WHERE id = %s AND dagster_run_id IS NULL",
                (run_id, decision_id),
            )


def claim_decision(
    url: str, decision_id: int, customer: str, run_id: str, lineage: set[str]
) -> Decision:
    """Take up a decision for a training run and return it.

    The run may use it when nobody has, when it is the run the decision was launched as, or
    when it re-executes that run (`lineage`: the run's parent and root run ids).

    Raises:
        DecisionRefused: unknown id, another customer's decision, or used by another run.
    """
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_COLUMNS} FROM retraining_decisions WHERE id = %s FOR UPDATE",
            (decision_id,),
        )
        row = cur.fetchone()
        if row is None:
            raise DecisionRefused(f"retraining decision {decision_id} does not exist")
        decision = Decision(*row)
        if decision.customer != customer:
            raise DecisionRefused(
                f"retraining decision {decision_id} is for {decision.customer}, not {customer}"
            )
        used_by = decision.dagster_run_id
        if used_by is not None and used_by != run_id and used_by not in lineage:
            raise DecisionRefused(
                f"retraining decision {decision_id} was already used by run {used_by}; "
                "each decision trains once (decide again, or re-execute that run)"
            )
        if used_by is None:
            cur.execute(
                "UPDATE retraining_decisions SET dagster_run_id = %s WHERE id = %s",
                (run_id, decision_id),
            )
        return decision


def decision_of_runs(url: str, customer: str, run_ids: set[str]) -> Decision | None:
    """Return the customer's decision taken up by one of these runs (a re-execution's lineage)."""
    if not run_ids:
        return None
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_COLUMNS} FROM retraining_decisions WHERE customer = %s"
            " AND dagster_run_id = ANY(%s) ORDER BY id DESC LIMIT 1",
            (customer, sorted(run_ids)),
        )
        row = cur.fetchone()
    return Decision(*row) if row else None
