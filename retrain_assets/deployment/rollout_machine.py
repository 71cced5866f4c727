"""The rollout machine: one deployment decision's way from canary to champion (or back).

    START -> CANARY_10 (yields) -> CANARY_50 (yields) -> PROMOTE -> DONE
    an inconclusive analysis (RETRAIN_CANARY_RULE=evidence) extends the step in place
    START -> PROMOTE (first deployment: no champion to compare a canary with)
    a failed analysis, a hand abort or no data for too long -> ROLLBACK -> ROLLED_BACK

Same engine and tables as the training machine; the run key is `deploy-<decision id>`. A canary
state, on entering, points alias `canary` at the version and routes its share of traffic to
it, keeping the step's start in the payload; it then yields until the step has run its minimum
time, and analyses it with the facts the caller fetched for the whole tick (`prefetched`). The
routes, analyses, outcomes and champion moves it produces are handed to `RolloutWrites` and
commit with the pointer; the MLflow aliases are moved by the transition itself (idempotent).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from retrain_assets.deployment.analysis import StepObservation, StepVerdict, judge_step
from retrain_assets.deployment.rollout_settings import RolloutSettings, rollout_settings, step_name
from retrain_assets.deployment.routes import Route
from retrain_assets.deployment.writes import AnalysisRow, ChampionMove, Finish, RolloutWrites
from retrain_assets.machines.step import Context, Step
from retrain_assets.machines.table import DONE, FAILED, Machine, State

NAME = "rollout"
START = "START"
PROMOTE = "PROMOTE"
ROLLBACK = "ROLLBACK"
ROLLED_BACK = "ROLLED_BACK"
FACTS = "rollout_facts"  # the key of TickFacts in `prefetched`
TERMINAL = frozenset({DONE, ROLLED_BACK, FAILED})
SIDE_STATES = (START, PROMOTE, ROLLBACK)
RETRY_BUDGET = 5  # visits of START, PROMOTE and ROLLBACK (a failed visit retries next advance)


class AliasRegistry(Protocol):
    """The MLflow aliases a rollout moves (see `MlflowRegistry`)."""

    def set_canary(self, customer: str, version: str) -> None:
        """Point alias `canary` at the version."""
        ...

    def remove_canary(self, customer: str) -> None:
        """Remove alias `canary`."""
        ...

    def promote(self, customer: str, version: str, previous: str | None, decision_id: int) -> None:
        """Make the version the champion; the old one keeps alias `previous`."""
        ...


@dataclass(frozen=True)
class TickFacts:
    """What the caller read once for every customer it advances.

    Attributes:
        aborts: customer -> (reason, who) of a hand abort recorded on its rollout.
        observations: rollout id -> the observation of its current step (only for steps
            whose minimum time has passed).
    """

    aborts: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    observations: Mapping[int, StepObservation] = field(default_factory=dict)


@dataclass(frozen=True)
class RolloutServices:
    """What the rollout's transitions use; the caller flushes `writes` with each chunk."""

    registry: AliasRegistry
    writes: RolloutWrites
    settings: RolloutSettings
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)


Ctx = Context[RolloutServices]


def _facts(ctx: Ctx) -> TickFacts | None:
    facts = ctx.prefetched.get(FACTS)
    return facts if isinstance(facts, TickFacts) else None


def _aborted(ctx: Ctx) -> Step | None:
    """Return the step into ROLLBACK when a hand abort was recorded for this rollout."""
    facts = _facts(ctx)
    found = facts.aborts.get(ctx.customer) if facts else None
    if found is None:
        return None
    reason, who = found
    why = f"aborted by {who} in {ctx.state}: {reason}"
    return Step.success(why, branch="aborted", payload={"rollback_reason": why})


def start(ctx: Ctx) -> Step:
    """Route the rollout: canary steps against the champion, or straight to a first promotion."""
    abort = _aborted(ctx)
    if abort:
        return abort
    version, champion = ctx.payload["version"], ctx.payload.get("champion")
    if champion is None:
        why = (
            f"first deployment: no champion to compare a canary with, so version {version} "
            "is promoted directly (it passed the deploy-time check against seasonal naive)"
        )
        return Step.success(why, branch="first deployment", payload={"promotion_reason": why})
    return Step.success(f"rolling out version {version} against champion version {champion}")


def canary_step(weight: float) -> Callable[[Ctx], Step]:
    """Return the transition of the canary step that sends `weight` of the traffic."""

    def canary(ctx: Ctx) -> Step:
        abort = _aborted(ctx)
        if abort:
            return abort
        payload, services = ctx.payload, ctx.services
        version, rollout_id = str(payload["version"]), int(payload["rollout_id"])
        if payload.get("step") != ctx.state:
            return _enter(ctx, version, rollout_id, weight)
        started = timer_start(payload)
        ran = (services.clock() - started).total_seconds()
        if ran < services.settings.step_seconds:
            return Step.wait(f"step timer: {ran:.0f} of {services.settings.step_seconds} s")
        facts = _facts(ctx)
        seen = facts.observations.get(rollout_id) if facts else None
        if seen is None or seen.step != ctx.state:
            return Step.wait("no observation of this step in this advance")
        waited = int(payload.get("no_data_intervals", 0))
        extended = int(payload.get("inconclusive", 0))
        verdict = judge_step(seen, services.settings, waited, weight=weight, inconclusive=extended)
        if verdict.kind == "wait":
            return Step.wait(verdict.reason, payload={"no_data_intervals": waited + 1})
        services.writes.add(ctx.customer, _analysis_row(rollout_id, seen, verdict))
        if verdict.kind == "inconclusive":  # the step runs another `step_seconds`
            return Step.wait(
                f"{ctx.state} {verdict.reason}",
                payload={
                    "inconclusive": extended + 1,
                    "extended_at": services.clock().isoformat(),
                },
            )
        if verdict.kind == "pass":
            passed = [*payload.get("passed_steps", []), ctx.state]
            return Step.success(
                f"{ctx.state} passed: {verdict.reason}", payload={"passed_steps": passed}
            )
        why = f"{ctx.state} analysis failed: {verdict.reason}"
        return Step.failure(why, branch="analysis failed", payload={"rollback_reason": why})

    canary.__name__ = f"canary_{step_name(weight).lower()}"
    return canary


def _enter(ctx: Ctx, version: str, rollout_id: int, weight: float) -> Step:
    """Point the canary alias (once per rollout) and route `weight` of traffic to it."""
    services = ctx.services
    if not ctx.payload.get("canary_set"):
        services.registry.set_canary(ctx.customer, version)
    champion = ctx.payload.get("champion")
    services.writes.add(
        ctx.customer, Route(ctx.customer, champion, version, weight, rollout_id, ctx.state)
    )
    return Step.wait(
        f"canary version {version} gets {weight:.0%} of {ctx.customer}'s traffic",
        payload={
            "step": ctx.state,
            "weight": weight,
            "canary_set": True,
            "no_data_intervals": 0,
            "inconclusive": 0,
            "extended_at": None,
            "step_started_at": services.clock().isoformat(),
        },
    )


def timer_start(payload: Mapping[str, Any]) -> dt.datetime:
    """Return when the step's current wait began: its start, or its last inconclusive analysis."""
    return dt.datetime.fromisoformat(str(payload.get("extended_at") or payload["step_started_at"]))


def _analysis_row(rollout_id: int, seen: StepObservation, verdict: StepVerdict) -> AnalysisRow:
    return AnalysisRow(
        rollout_id=rollout_id,
        step=seen.step,
        canary_requests=seen.canary_requests,
        canary_errors=seen.canary_errors,
        canary_nonfinite=seen.canary_nonfinite,
        rows_with_actuals=seen.rows_with_actuals,
        canary_wape=seen.canary_wape,
        champion_wape=seen.champion_wape,
        passed=verdict.kind == "pass",
        reason=verdict.reason,
        outcome=verdict.kind,
        rule=verdict.rule,
        evidence=verdict.evidence.as_metadata() if verdict.evidence else None,
        canary_coverage=seen.canary_coverage,
    )


def promote(ctx: Ctx) -> Step:
    """Move `champion` to the version (the old one keeps `previous`), send it all traffic."""
    payload = ctx.payload
    version, previous = str(payload["version"]), payload.get("champion")
    rollout_id, decision_id = int(payload["rollout_id"]), int(payload["decision_id"])
    steps = payload.get("passed_steps") or []
    why = payload.get("promotion_reason") or f"promoted after {' and '.join(steps)} passed"
    ctx.services.registry.promote(ctx.customer, version, previous, decision_id)
    ctx.services.writes.add(
        ctx.customer,
        Finish(rollout_id, "promoted", why),
        ChampionMove(ctx.customer, previous, version, decision_id, rollout_id),
        Route(ctx.customer, version),
    )
    return Step.success(why)


def rollback(ctx: Ctx) -> Step:
    """Remove alias `canary` and send the canary no traffic; the champion never moved."""
    payload = ctx.payload
    rollout_id, why = int(payload["rollout_id"]), str(payload.get("rollback_reason"))
    ctx.services.registry.remove_canary(ctx.customer)
    ctx.services.writes.add(
        ctx.customer,
        Finish(rollout_id, "rolled_back", why),
        Route(ctx.customer, payload.get("champion")),
    )
    return Step.success(why)


def canary_states(settings: RolloutSettings) -> list[str]:
    """Return the canary steps' state names, in order (CANARY_10, CANARY_50 by default)."""
    return [step_name(weight) for weight in settings.step_weights]


def rollout_machine(settings: RolloutSettings | None = None) -> Machine:
    """Return the rollout machine for the step weights and budgets of `settings`.

    A canary step may be visited once to enter, once per analysis without enough data (up to
    `max_no_data_intervals`), and a few more times for retried failures; START, PROMOTE and
    ROLLBACK retry a failed visit (MLflow unreachable) on the next advance, five times.
    """
    chosen = settings or rollout_settings()
    names = canary_states(chosen)
    states: dict[str, Any] = {
        START: State(
            start,
            names[0],
            START,
            may_yield=True,
            max_visits=RETRY_BUDGET,
            branches={"first deployment": PROMOTE, "aborted": ROLLBACK},
        ),
    }
    for index, (name, weight) in enumerate(zip(names, chosen.step_weights, strict=True)):
        following = names[index + 1] if index + 1 < len(names) else PROMOTE
        states[name] = State(
            canary_step(weight),
            following,
            name,
            may_yield=True,
            max_visits=chosen.canary_visit_budget,
            branches={"analysis failed": ROLLBACK, "aborted": ROLLBACK},
        )
    states[PROMOTE] = State(promote, DONE, PROMOTE, may_yield=True, max_visits=RETRY_BUDGET)
    states[ROLLBACK] = State(
        rollback, ROLLED_BACK, ROLLBACK, may_yield=True, max_visits=RETRY_BUDGET
    )
    return Machine(name=NAME, initial=START, terminal=TERMINAL, states=states)
