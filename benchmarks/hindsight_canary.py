"""The decision benchmark's canaries: the platform's rollout machine, driven without a database.

`bench_hindsight.py` replays demo days offline. A rollout there runs the very table and
transitions the controller runs (`deployment/rollout_machine.py`), timed by the controller's own
rule for when a step is due (`deployment/advancing.py`'s `advance_due` and `analysis_due`),
observed as `deployment/observations.py` observes a step (`step_observation` on pairs scored by
`score_joined`), and routed through the table by the engine's `route`. Only the storage is
replaced: the pointer, its payload and visits live in a `CanaryRun`, the MLflow aliases in
`MemoryAliases`, and the rows a transition writes are read back from `RolloutWrites`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pandas as pd

from retrain_assets.deployment.advancing import advance_due, analysis_due
from retrain_assets.deployment.analysis import StepObservation
from retrain_assets.deployment.canary_evidence import PAIR_COLUMNS
from retrain_assets.deployment.observations import DueStep, score_joined, step_observation
from retrain_assets.deployment.rollout_machine import (
    FACTS,
    NAME,
    START,
    RolloutServices,
    TickFacts,
    canary_states,
)
from retrain_assets.deployment.rollout_settings import RolloutSettings
from retrain_assets.deployment.writes import AnalysisRow, Finish, RolloutWrites
from retrain_assets.machines.engine import route, run_transition
from retrain_assets.machines.step import Context
from retrain_assets.machines.table import Machine

OUTCOMES = {"promoted", "rolled_back", "failed"}


class MemoryAliases:
    """The MLflow aliases a rollout moves, kept in memory (the replay keeps its own champion)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None]] = []

    def set_canary(self, customer: str, version: str) -> None:
        self.calls.append(("set_canary", customer, version))

    def remove_canary(self, customer: str) -> None:
        self.calls.append(("remove_canary", customer, None))

    def promote(self, customer: str, version: str, previous: str | None, decision_id: int) -> None:
        self.calls.append(("promote", customer, version))


@dataclass
class CanaryRun:
    """One rollout's pointer (state, payload, visits) and what its steps served and decided."""

    customer: str
    rollout_id: int
    payload: dict[str, Any]
    state: str = START
    visits: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)  # canary predictions per step
    pairs: list[pd.DataFrame] = field(default_factory=list)  # served rows with both forecasts
    analyses: list[AnalysisRow] = field(default_factory=list)
    outcome: str | None = None  # promoted, rolled_back or failed (a budget ran out)
    reason: str = ""

    @property
    def weight(self) -> float | None:
        """Return the canary's share of traffic now (None: no canary step entered)."""
        if self.payload.get("step") != self.state:
            return None
        return float(self.payload["weight"])


def start_run(customer: str, rollout_id: int, version: str, champion: str | None) -> CanaryRun:
    """Return a rollout as `deployment_decision` starts one: START, the version and champion."""
    payload = {
        "version": version,
        "champion": champion,
        "rollout_id": rollout_id,
        "decision_id": rollout_id,
    }
    return CanaryRun(customer, rollout_id, payload)


def observe_run(
    run: CanaryRun, settings: RolloutSettings, rows_per_day: float
) -> StepObservation | None:
    """Return the observation of the run's current step, as `observations.observe` makes it.

    Every served day has been published by the time a step is analysed, so all pairs have
    their actuals.
    """
    if run.weight is None:
        return None
    joined = pd.concat(run.pairs, ignore_index=True) if run.pairs else _no_pairs()
    step = DueStep(run.rollout_id, run.customer, run.state)
    evidence = settings.canary_rule == "evidence"
    return step_observation(
        step,
        (run.requests.get(run.state, 0), 0, 0),
        score_joined(joined).get(run.rollout_id, (0, None, None)),
        settings.min_predictions,
        joined[PAIR_COLUMNS].reset_index(drop=True) if evidence else None,
        rows_per_day if evidence else 0.0,
    )


def _no_pairs() -> pd.DataFrame:
    columns = ["rollout_id", "customer", "store_id", "item_id", "forecast_date", "canary"]
    return pd.DataFrame(columns=[*columns, "champion", "actual"])


def tick(
    machine: Machine,
    run: CanaryRun,
    settings: RolloutSettings,
    now: dt.datetime,
    rows_per_day: float,
) -> None:
    """Advance the run once as a controller tick does: skipped inside its step's timer."""
    if run.outcome is not None:
        return
    canaries = canary_states(settings)
    if not advance_due(run.state, run.payload, now, settings, canaries, aborted=False):
        return
    due = analysis_due(run.state, run.payload, now, settings, canaries)
    seen = observe_run(run, settings, rows_per_day) if due else None
    facts = TickFacts(observations={run.rollout_id: seen} if seen is not None else {})
    writes = RolloutWrites()
    services = RolloutServices(MemoryAliases(), writes, settings, lambda: now)
    _trampoline(machine, run, services, {FACTS: facts})
    for row in writes.pending().get(run.customer, []):
        if isinstance(row, AnalysisRow):
            run.analyses.append(row)
        elif isinstance(row, Finish):
            run.outcome, run.reason = row.outcome, row.reason
    if run.outcome is None and run.state == machine.failed:
        run.outcome = "failed"  # `advance_rollouts` closes it: the canary gets no traffic
        run.reason = str(run.payload.get("rollback_reason") or "a budget ran out")


def _trampoline(
    machine: Machine, run: CanaryRun, services: RolloutServices, prefetched: Mapping[str, Any]
) -> None:
    """Visit states until a yield or the end, as the engine's advance does (no retry backoff)."""
    visited = 0
    while run.state not in machine.terminal:
        state = machine.states[run.state]
        visit = run.visits.get(run.state, 0) + 1
        if state.max_visits is not None and visit > state.max_visits:
            run.state = machine.failed
            return
        context = Context(
            machine=NAME,
            customer=run.customer,
            run_key=f"deploy-{run.rollout_id}",
            state=run.state,
            visit=visit,
            payload=MappingProxyType(dict(run.payload)),
            services=services,
            prefetched=MappingProxyType(dict(prefetched) if not visited else {}),
        )
        step = run_transition(state, context)
        target, stays = route(run.state, state, step)
        run.payload.update(step.payload)
        run.visits[run.state] = visit
        run.state = target
        visited += 1
        if stays:
            return
