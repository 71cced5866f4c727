"""Advancing rollouts: what a controller tick, `deployment_decision` and `rollback` share.

Every advance of the rollout machine goes through `advance_rollouts`, so each one sees the
same facts: the rollouts in progress and their hand aborts, and, for the canary steps whose
minimum time has passed, one observation read for all of them at once. A step still inside
its minimum time is not advanced at all: waiting costs no visit, no row and no process.
Rollouts whose machine ended FAILED (a budget ran out) are closed here on the safe side: the
canary gets no traffic, alias `canary` is removed and the rollout records why.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlflow.exceptions import MlflowException

from retrain_assets.deployment.canary_evidence import daily_rows
from retrain_assets.deployment.observations import DueStep, observe
from retrain_assets.deployment.records import ActiveRollout, active_rollouts
from retrain_assets.deployment.rollout_machine import (
    FACTS,
    NAME,
    ROLLED_BACK,
    AliasRegistry,
    RolloutServices,
    TickFacts,
    canary_states,
    rollout_machine,
    timer_start,
)
from retrain_assets.deployment.rollout_settings import RolloutSettings, rollout_settings
from retrain_assets.deployment.routes import Route
from retrain_assets.deployment.writes import Finish, RolloutWrites
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.machines.engine import AdvanceResult, advance_many
from retrain_assets.machines.table import DONE
from retrain_assets.store.database import transaction
from retrain_assets.store.snapshots import latest_snapshots

CHUNK = 100  # customers per transaction: a chunk of promotions stays a few seconds of MLflow
_OUTCOME_OF_END = {DONE: "promoted", ROLLED_BACK: "rolled_back"}


@dataclass
class TickReport:
    """What one call did, for the sensor's tick log and the CLI."""

    active: int = 0
    waiting: int = 0  # inside their step's minimum time: not advanced
    observed: int = 0
    before: dict[str, str] = field(default_factory=dict)  # customer -> state before advancing
    results: dict[str, AdvanceResult] = field(default_factory=dict)
    deferred: list[str] = field(default_factory=list)
    closed: dict[str, str] = field(default_factory=dict)  # customer -> why it was closed
    problems: dict[str, str] = field(default_factory=dict)  # customer -> what went wrong

    def ended(self, state: str) -> list[str]:
        """Return the customers whose rollout reached `state` in this call."""
        return sorted(
            c for c, r in self.results.items() if r.pointer is not None and r.pointer.state == state
        )


def advance_rollouts(
    url: str,
    registry: AliasRegistry,
    features: ParquetPartitionStore,
    *,
    customers: Sequence[str] | None = None,
    settings: RolloutSettings | None = None,
    deadline: float | None = None,
    clock: Callable[[], dt.datetime] | None = None,
    chunk: int = CHUNK,
) -> TickReport:
    """Advance every rollout in progress (or those of `customers`) that has something to do.

    Args:
        url: the project database.
        registry: moves the MLflow aliases.
        features: where the actual sales (`store_day_features` days) are.
        customers: only these customers' rollouts (None: all).
        settings: thresholds and timers (default: the environment's).
        deadline: a `time.monotonic()` value after which no new chunk starts.
        clock: the current time (tests move it).
        chunk: customers advanced per transaction.
    """
    chosen = settings or rollout_settings()
    now = clock or (lambda: dt.datetime.now(dt.UTC))
    machine = rollout_machine(chosen)
    report = TickReport()
    active = active_rollouts(url, NAME, customers)
    report.active = len(active)
    moving = [a for a in active if a.pointer is not None and not a.pointer.terminal]
    ended = [a for a in active if a.pointer is None or a.pointer.terminal]
    _close_ended(url, registry, ended, report)
    tick_time = now()
    canaries = set(canary_states(chosen))
    due = [a for a in moving if _due(a, tick_time, chosen, canaries)]
    report.waiting = len(moving) - len(due)
    analysing = [
        DueStep(a.rollout.id, a.rollout.customer, a.pointer.state)
        for a in due
        if a.pointer is not None and _analysing(a, tick_time, chosen, canaries)
    ]
    snapshots = latest_snapshots(url) if analysing else {}
    evidence = chosen.canary_rule == "evidence"
    facts = TickFacts(
        aborts={
            a.rollout.customer: (a.rollout.abort_reason, a.rollout.abort_by or "someone")
            for a in due
            if a.rollout.abort_reason
        },
        observations=observe(
            url,
            analysing,
            features,
            snapshots.keys(),
            chosen.min_predictions,
            daily_rows(snapshots, {d.customer for d in analysing}) if evidence else None,
            keep_pairs=evidence,
        ),
    )
    report.observed = len(facts.observations)
    writes = RolloutWrites()
    services = RolloutServices(registry, writes, chosen, now)
    names = [a.rollout.customer for a in due]
    report.before = {a.rollout.customer: a.pointer.state for a in due if a.pointer is not None}
    report.results = advance_many(
        url,
        machine,
        names,
        services,
        prefetched={FACTS: facts},
        chunk=chunk,
        deadline=deadline,
        before_commit=writes.flush,
    )
    report.deferred = [c for c in names if c not in report.results]
    for customer, result in report.results.items():
        if result.error is not None:
            report.problems[customer] = f"the machine could not advance: {result.error}"
    failed = set(report.ended(machine.failed))
    _close_ended(
        url,
        registry,
        [a for a in due if a.rollout.customer in failed],
        report,
        {c: report.results[c] for c in failed},
    )
    return report


def _payload(active: ActiveRollout) -> tuple[str | None, Mapping[str, Any]]:
    """Return the rollout's state and payload (None, {}: no machine run)."""
    pointer = active.pointer
    return (pointer.state, pointer.payload) if pointer else (None, {})


def _analysing(
    active: ActiveRollout, now: dt.datetime, settings: RolloutSettings, canaries: set[str]
) -> bool:
    """Return True when the current canary step has run its minimum time."""
    state, payload = _payload(active)
    return analysis_due(state, payload, now, settings, canaries)


def _due(
    active: ActiveRollout, now: dt.datetime, settings: RolloutSettings, canaries: set[str]
) -> bool:
    """Return True when an advance would do something: all but a step inside its timer."""
    state, payload = _payload(active)
    return advance_due(state, payload, now, settings, canaries, bool(active.rollout.abort_reason))


def in_step(state: str | None, payload: Mapping[str, Any], canaries: Collection[str]) -> bool:
    """Return True when `state` is a canary step the rollout has already entered."""
    return state in canaries and payload.get("step") == state


def analysis_due(
    state: str | None,
    payload: Mapping[str, Any],
    now: dt.datetime,
    settings: RolloutSettings,
    canaries: Collection[str],
) -> bool:
    """Return True when the current canary step has run its minimum time: observe it now.

    Pure (the pointer's state and payload), so the decision benchmark times its steps as the
    controller does.
    """
    if not in_step(state, payload, canaries) or not payload.get("step_started_at"):
        return False
    return (now - timer_start(payload)).total_seconds() >= settings.step_seconds


def advance_due(
    state: str | None,
    payload: Mapping[str, Any],
    now: dt.datetime,
    settings: RolloutSettings,
    canaries: Collection[str],
    aborted: bool,
) -> bool:
    """Return True when an advance would do something: all but a step inside its timer."""
    if aborted or not in_step(state, payload, canaries):
        return True
    return analysis_due(state, payload, now, settings, canaries)


def _close_ended(
    url: str,
    registry: AliasRegistry,
    ended: list[ActiveRollout],
    report: TickReport,
    fresh: dict[str, AdvanceResult] | None = None,
) -> None:
    """Close rollouts whose machine ended without recording an outcome (a budget ran out).

    Traffic first (the canary gets none), then alias `canary`, then the outcome: an MLflow
    failure leaves the rollout open, and the next call tries again.
    """
    for item in ended:
        customer, rollout = item.rollout.customer, item.rollout
        pointer = fresh[customer].pointer if fresh and customer in fresh else item.pointer
        state = pointer.state if pointer else None
        outcome = _OUTCOME_OF_END.get(state or "", "failed")
        why = (pointer.reason if pointer else None) or "the rollout machine has no run"
        champion = pointer.payload.get("champion") if pointer else None
        if state == DONE and pointer is not None:
            champion = pointer.payload.get("version")
        writes = RolloutWrites()
        writes.add(customer, Route(customer, champion))
        with transaction(url) as cur:
            writes.flush(cur)
        try:
            registry.remove_canary(customer)
        except MlflowException as err:
            report.problems[customer] = f"could not remove alias canary: {err}"
            continue
        writes.add(customer, Finish(rollout.id, outcome, f"{state or 'no machine run'}: {why}"))
        with transaction(url) as cur:
            writes.flush(cur)
        report.closed[customer] = f"{outcome}: {why}"


def budget_deadline(seconds: float) -> float:
    """Return a `time.monotonic()` deadline `seconds` from now."""
    return time.monotonic() + seconds
