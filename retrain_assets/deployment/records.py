"""Deployment decisions and their rollouts: the rows that say who deployed what, and how it went.

A deployment decision is the only thing that starts a rollout, and it starts exactly one: the
decision, its rollout row and the rollout machine's pointer are written in one transaction.
A customer has at most one rollout in progress (a partial unique index), so a second
decision while one is rolling out is refused with the rollout it would collide with.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg2.errors
import psycopg2.extensions

from retrain_assets.customers import validate_customer_name
from retrain_assets.machines import store
from retrain_assets.machines.table import Machine
from retrain_assets.store.database import one_row, transaction

_DECISION = """d.id, d.customer, d.version, d.run_key, d.decided_by, d.reason, d.gate_result_id,
    d.previous_champion, d.dagster_run_id, d.mlflow_run_id, d.decided_at"""
_ROLLOUT = """r.id, r.decision_id, r.customer, r.version, r.outcome, r.reason, r.started_at,
    r.finished_at, r.abort_reason, r.abort_by, r.abort_requested_at"""


class DeploymentRefused(ValueError):
    """A deployment cannot start (or be aborted) as asked; the message says why."""


@dataclass(frozen=True)
class DeploymentDecision:
    """One explicit decision to deploy a registered version of a customer's model."""

    id: int
    customer: str
    version: str
    run_key: str
    decided_by: str
    reason: str
    gate_result_id: int
    previous_champion: str | None
    dagster_run_id: str | None
    mlflow_run_id: str | None
    decided_at: dt.datetime

    @property
    def rollout_key(self) -> str:
        """Return the rollout machine's run key for this decision (`deploy-<id>`)."""
        return f"deploy-{self.id}"


@dataclass(frozen=True)
class Rollout:
    """The rollout of one decision; `outcome` is None while it is in progress."""

    id: int
    decision_id: int
    customer: str
    version: str
    outcome: str | None
    reason: str | None
    started_at: dt.datetime
    finished_at: dt.datetime | None
    abort_reason: str | None
    abort_by: str | None
    abort_requested_at: dt.datetime | None


@dataclass(frozen=True)
class DeploymentRequest:
    """What a `deployment_decision` run decided, before it is recorded."""

    customer: str
    version: str
    run_key: str
    decided_by: str
    reason: str
    gate_result_id: int
    previous_champion: str | None
    dagster_run_id: str
    mlflow_run_id: str | None = None


@dataclass(frozen=True)
class StartedDeployment:
    """The recorded decision and its rollout; `new` is False for a re-executed run's own."""

    decision: DeploymentDecision
    rollout: Rollout
    new: bool


def start_deployment(
    url: str, request: DeploymentRequest, lineage: set[str], machine: Machine
) -> StartedDeployment:
    """Record the decision, its rollout and the machine's new run, in one transaction.

    A run that re-executes the run that decided (its parent or root is in `lineage`) gets
    that decision back instead of a second one.

    Raises:
        DeploymentRefused: the customer has a rollout in progress, or its rollout machine is
            being advanced right now.
    """
    try:
        with transaction(url) as cur:
            earlier = _decision_of_runs(cur, request.customer, lineage | {request.dagster_run_id})
            if earlier is not None:
                return StartedDeployment(earlier, _rollout_of(cur, earlier.id), new=False)
            _refuse_if_rolling(cur, request.customer)
            decision = _insert_decision(cur, request)
            cur.execute(
                f"INSERT INTO rollouts AS r (decision_id, customer, version) VALUES (%s, %s, %s)"
                f" RETURNING {_ROLLOUT}",
                (decision.id, request.customer, request.version),
            )
            rollout = Rollout(*one_row(cur))
            payload = {
                "rollout_id": rollout.id,
                "decision_id": decision.id,
                "version": request.version,
                "champion": request.previous_champion,
                "mlflow_run_id": request.mlflow_run_id,
            }
            _point_machine(cur, machine, request.customer, decision.rollout_key, payload)
            return StartedDeployment(decision, rollout, new=True)
    except psycopg2.errors.UniqueViolation:  # a concurrent decision won the race
        with transaction(url) as cur:
            _refuse_if_rolling(cur, request.customer)
        raise


def _insert_decision(cur: Any, request: DeploymentRequest) -> DeploymentDecision:
    cur.execute(
        f"""
        INSERT INTO deployment_decisions AS d (customer, version, run_key, decided_by, reason,
            gate_result_id, previous_champion, dagster_run_id, mlflow_run_id)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_DECISION}
        """,
        (
            request.customer,
            request.version,
            request.run_key,
            request.decided_by,
            request.reason,
            request.gate_result_id,
            request.previous_champion,
            request.dagster_run_id,
            request.mlflow_run_id,
        ),
    )
    return DeploymentDecision(*one_row(cur))


def _point_machine(
    cur: psycopg2.extensions.cursor,
    machine: Machine,
    customer: str,
    run_key: str,
    payload: dict[str, Any],
) -> None:
    """Start the rollout machine's run for this decision, inside the caller's transaction."""
    if store.insert_pointer(cur, machine.name, customer, run_key, machine.initial, payload):
        return
    current = store.read_pointer(cur, machine.name, customer, lock=True)
    if current is None:
        raise DeploymentRefused(
            f"{customer}'s {machine.name} machine is being advanced right now; try again"
        )
    if not current.terminal:
        raise DeploymentRefused(
            f"{customer}'s {machine.name} machine is still in {current.state} for "
            f"{current.run_key} although no rollout is in progress; finish or repair that run"
        )
    store.reset_pointer(cur, machine.name, customer, run_key, machine.initial, payload)


def _refuse_if_rolling(cur: psycopg2.extensions.cursor, customer: str) -> None:
    cur.execute(
        f"SELECT {_ROLLOUT} FROM rollouts r WHERE r.customer = %s AND r.outcome IS NULL",
        (customer,),
    )
    row = cur.fetchone()
    if row is not None:
        active = Rollout(*row)
        raise DeploymentRefused(
            f"{customer} has rollout {active.id} of version {active.version} in progress "
            f"(decision {active.decision_id}); wait for it to finish or abort it with "
            f"`retrain-assets rollback {customer} --reason ...`"
        )


def _decision_of_runs(
    cur: psycopg2.extensions.cursor, customer: str, run_ids: set[str]
) -> DeploymentDecision | None:
    cur.execute(
        f"SELECT {_DECISION} FROM deployment_decisions d WHERE d.customer = %s"
        " AND d.dagster_run_id = ANY(%s) ORDER BY d.id DESC LIMIT 1",
        (customer, sorted(run_ids)),
    )
    row = cur.fetchone()
    return DeploymentDecision(*row) if row else None


def _rollout_of(cur: psycopg2.extensions.cursor, decision_id: int) -> Rollout:
    cur.execute(f"SELECT {_ROLLOUT} FROM rollouts r WHERE r.decision_id = %s", (decision_id,))
    return Rollout(*one_row(cur))


def request_abort(url: str, customer: str, reason: str, by: str) -> Rollout:
    """Record a hand abort on the customer's rollout in progress; the next advance acts on it.

    Raises:
        DeploymentRefused: no rollout is in progress for the customer, or no reason given.
    """
    if not reason.strip():
        raise DeploymentRefused("a rollback needs a reason (--reason TEXT)")
    with transaction(url) as cur:
        cur.execute(
            "UPDATE rollouts r SET abort_reason = %s, abort_by = %s,"
            " abort_requested_at = clock_timestamp() WHERE r.customer = %s"
            f" AND r.outcome IS NULL RETURNING {_ROLLOUT}",
            (reason.strip(), by, customer),
        )
        row = cur.fetchone()
    if row is None:
        raise DeploymentRefused(f"{customer} has no rollout in progress to roll back")
    return Rollout(*row)


@dataclass(frozen=True)
class ActiveRollout:
    """A rollout in progress with its machine pointer (None if the pointer is missing)."""

    rollout: Rollout
    pointer: store.Pointer | None


def active_rollouts(
    url: str, machine: str, customers: Sequence[str] | None = None
) -> list[ActiveRollout]:
    """Return every rollout in progress (or those of `customers`), with its machine pointer."""
    columns = ", ".join(f"p.{f.name}" for f in dataclasses.fields(store.Pointer))
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_ROLLOUT}, {columns} FROM rollouts r LEFT JOIN machine_pointers p"
            " ON p.machine = %s AND p.customer = r.customer"
            " AND p.run_key = 'deploy-' || r.decision_id"
            " WHERE r.outcome IS NULL AND (%s::text[] IS NULL OR r.customer = ANY(%s))"
            " ORDER BY r.customer",
            (
                machine,
                None if customers is None else list(customers),
                None if customers is None else list(customers),
            ),
        )
        rows = cur.fetchall()
    width = len(Rollout.__dataclass_fields__)
    return [
        ActiveRollout(Rollout(*row[:width]), store.Pointer(*row[width:]) if row[width] else None)
        for row in rows
    ]


def decision(url: str, decision_id: int) -> DeploymentDecision | None:
    """Return one decision."""
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_DECISION} FROM deployment_decisions d WHERE d.id = %s", (decision_id,)
        )
        row = cur.fetchone()
    return DeploymentDecision(*row) if row else None


@dataclass(frozen=True)
class Deployment:
    """A decision with its rollout (if it started one) and how many analyses it recorded."""

    decision: DeploymentDecision
    rollout: Rollout | None
    analyses: int
    state: str | None
    inconclusive: int = 0  # of the analyses, those that extended their step
    last_analysis: str | None = None  # "<step> <outcome> (<rule>): <reason>"


def list_deployments(url: str, customer: str | None = None, limit: int = 50) -> list[Deployment]:
    """Return the latest decisions, newest first, with their rollouts."""
    with transaction(url) as cur:
        cur.execute(
            f"""
            SELECT {_DECISION}, {_ROLLOUT},
                (SELECT count(*) FROM rollout_analyses a WHERE a.rollout_id = r.id),
                p.state,
                (SELECT count(*) FROM rollout_analyses a
                    WHERE a.rollout_id = r.id AND a.outcome = 'inconclusive'),
                (SELECT a.step || ' ' || coalesce(a.outcome,
                        CASE WHEN a.passed THEN 'pass' ELSE 'fail' END)
                    || coalesce(' (' || a.rule || ')', '') || ': ' || a.reason
                    FROM rollout_analyses a WHERE a.rollout_id = r.id ORDER BY a.id DESC LIMIT 1)
            FROM deployment_decisions d LEFT JOIN rollouts r ON r.decision_id = d.id
            LEFT JOIN machine_pointers p ON p.machine = 'rollout' AND p.customer = d.customer
                AND p.run_key = 'deploy-' || d.id
            WHERE (%s::text IS NULL OR d.customer = %s) ORDER BY d.id DESC LIMIT %s
            """,
            (customer, customer, limit),
        )
        rows = cur.fetchall()
    width = len(DeploymentDecision.__dataclass_fields__)
    rollout_width = len(Rollout.__dataclass_fields__)
    found = []
    for row in rows:
        rollout_row = row[width : width + rollout_width]
        found.append(
            Deployment(
                DeploymentDecision(*row[:width]),
                Rollout(*rollout_row) if rollout_row[0] is not None else None,
                int(row[-4] or 0),
                row[-3],
                int(row[-2] or 0),
                row[-1],
            )
        )
    return found


def set_auto_deploy(url: str, customer: str, on: bool, by: str) -> None:
    """Turn a customer's auto_deploy on or off.

    Raises:
        DeploymentRefused: the customer is not in the customers table.
    """
    validate_customer_name(customer)
    with transaction(url) as cur:
        cur.execute("SELECT 1 FROM customers WHERE name = %s", (customer,))
        if cur.fetchone() is None:
            raise DeploymentRefused(
                f"unknown customer {customer!r} (not in the customers table; add it with "
                "`retrain-assets customers add` or land its files)"
            )
        cur.execute(
            "INSERT INTO deployment_settings (customer, auto_deploy, updated_by)"
            " VALUES (%s, %s, %s) ON CONFLICT (customer) DO UPDATE SET"
            " auto_deploy = EXCLUDED.auto_deploy, updated_by = EXCLUDED.updated_by,"
            " updated_at = clock_timestamp()",
            (customer, on, by),
        )


def auto_deploy_settings(url: str) -> dict[str, bool]:
    """Return every customer's auto_deploy setting that was ever set (unset means off)."""
    with transaction(url) as cur:
        cur.execute("SELECT customer, auto_deploy FROM deployment_settings ORDER BY customer")
        return dict(cur.fetchall())


def auto_deploy_ready(url: str) -> set[str]:
    """Return the customers with auto_deploy on and no rollout in progress."""
    with transaction(url) as cur:
        cur.execute(
            "SELECT s.customer FROM deployment_settings s WHERE s.auto_deploy AND NOT EXISTS"
            " (SELECT 1 FROM rollouts r WHERE r.customer = s.customer AND r.outcome IS NULL)"
        )
        return {row[0] for row in cur.fetchall()}
