"""The rollout transitions' database writes, committed in the same transaction as the pointers.

A transition does not write directly: it hands its rows (the route, an analysis, the rollout's
outcome, a champion move) to `RolloutWrites`, and the engine's `before_commit` hook flushes them
with the chunk's pointers and history. So a route can never disagree with the step the machine
is in, a tick of 10,000 customers writes each kind of row with one statement per chunk, and a
customer whose advance the engine discarded (a fault) leaves no row behind.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import psycopg2.extensions
from psycopg2.extras import Json, execute_values

from retrain_assets.deployment.routes import Route, write_routes
from retrain_assets.machines.engine import AdvanceResult


@dataclass(frozen=True)
class AnalysisRow:
    """One analysis of one canary step (a `rollout_analyses` row)."""

    rollout_id: int
    step: str
    canary_requests: int
    canary_errors: int
    canary_nonfinite: int
    rows_with_actuals: int
    canary_wape: float | None
    champion_wape: float | None
    passed: bool
    reason: str
    outcome: str = ""  # pass, fail or inconclusive ("" : from `passed`)
    rule: str | None = None  # what decided (analysis.StepVerdict.rule)
    evidence: Mapping[str, object] | None = None  # the evidence rule's numbers
    canary_coverage: Mapping[str, float] | None = None  # its intervals' coverage, per level


@dataclass(frozen=True)
class Finish:
    """A rollout's outcome (promoted, rolled_back, failed) and why."""

    rollout_id: int
    outcome: str
    reason: str


@dataclass(frozen=True)
class ChampionMove:
    """One move of alias `champion`, with the decision and rollout that made it."""

    customer: str
    from_version: str | None
    to_version: str
    decision_id: int
    rollout_id: int


Pending = Route | AnalysisRow | Finish | ChampionMove


class RolloutWrites:
    """Rows the transitions produced, per customer, until the chunk they belong to commits."""

    def __init__(self) -> None:
        """Start with nothing pending."""
        self._pending: dict[str, list[Pending]] = defaultdict(list)

    def add(self, customer: str, *rows: Pending) -> None:
        """Keep rows of a customer's transition for the commit of its advance."""
        self._pending[customer].extend(rows)

    def pending(self) -> dict[str, list[Pending]]:
        """Return what is waiting to be written (a copy)."""
        return {customer: list(rows) for customer, rows in self._pending.items()}

    def flush(
        self,
        cur: psycopg2.extensions.cursor,
        results: Mapping[str, AdvanceResult] | None = None,
    ) -> int:
        """Write the rows of customers whose advance is being saved; drop everyone else's.

        Args:
            cur: the transaction the rows commit in (the engine's chunk transaction).
            results: the chunk's results; a customer whose advance reported an engine fault or
                was busy is dropped. None writes every pending row.

        Returns:
            How many rows were written.
        """
        saved = [
            row
            for customer, rows in self._pending.items()
            if results is None or _saved(results.get(customer))
            for row in rows
        ]
        self._pending.clear()
        write_routes(cur, [row for row in saved if isinstance(row, Route)])
        _insert_analyses(cur, [row for row in saved if isinstance(row, AnalysisRow)])
        _finish(cur, [row for row in saved if isinstance(row, Finish)])
        _insert_moves(cur, [row for row in saved if isinstance(row, ChampionMove)])
        return len(saved)


def _saved(result: AdvanceResult | None) -> bool:
    return result is not None and not result.busy and result.error is None


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _insert_analyses(cur: psycopg2.extensions.cursor, rows: list[AnalysisRow]) -> None:
    """Insert analyses with one statement of column arrays (cheaper than a VALUES list)."""
    if not rows:
        return
    cur.execute(
        "INSERT INTO rollout_analyses (rollout_id, step, canary_requests, canary_errors,"
        " canary_nonfinite, rows_with_actuals, canary_wape, champion_wape, passed, reason,"
        " outcome, rule, evidence, canary_coverage)"
        " SELECT * FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::int[], %s::int[],"
        " %s::int[], %s::float8[], %s::float8[], %s::bool[], %s::text[], %s::text[],"
        " %s::text[], %s::jsonb[], %s::jsonb[])",
        (
            [r.rollout_id for r in rows],
            [r.step for r in rows],
            [r.canary_requests for r in rows],
            [r.canary_errors for r in rows],
            [r.canary_nonfinite for r in rows],
            [r.rows_with_actuals for r in rows],
            [_finite(r.canary_wape) for r in rows],
            [_finite(r.champion_wape) for r in rows],
            [r.passed for r in rows],
            [r.reason for r in rows],
            [r.outcome or ("pass" if r.passed else "fail") for r in rows],
            [r.rule for r in rows],
            [Json(dict(r.evidence)) if r.evidence is not None else None for r in rows],
            [
                Json(dict(r.canary_coverage)) if r.canary_coverage is not None else None
                for r in rows
            ],
        ),
    )


def _finish(cur: psycopg2.extensions.cursor, rows: list[Finish]) -> None:
    """Record outcomes; a rollout that already has one keeps it (a repeated transition)."""
    if not rows:
        return
    execute_values(
        cur,
        "UPDATE rollouts AS r SET outcome = v.outcome, reason = v.reason,"
        " finished_at = clock_timestamp() FROM (VALUES %s) AS v(id, outcome, reason)"
        " WHERE r.id = v.id AND r.outcome IS NULL",
        [(r.rollout_id, r.outcome, r.reason) for r in rows],
        template="(%s::bigint, %s::text, %s::text)",
        page_size=max(len(rows), 1),
    )


def _insert_moves(cur: psycopg2.extensions.cursor, rows: list[ChampionMove]) -> None:
    """Record champion moves; one per rollout (a repeated promotion records nothing new)."""
    if not rows:
        return
    execute_values(
        cur,
        "INSERT INTO champion_moves (customer, from_version, to_version, decision_id,"
        " rollout_id) VALUES %s ON CONFLICT (rollout_id) DO NOTHING",
        [(r.customer, r.from_version, r.to_version, r.decision_id, r.rollout_id) for r in rows],
        page_size=max(len(rows), 1),
    )
