"""The flat trampoline: run one customer's machine until a terminal state or a yield.

One advance is one transaction holding the pointer's row lock (`FOR UPDATE SKIP LOCKED`), so
two replicas never drive the same customer: the second one sees the lock and reports busy at
once. Steps run in a plain loop, never by recursion, so a state visited a thousand times costs
a thousand loop turns, not a thousand stack frames. History rows are written in the same
transaction and committed with the pointer; only an unexpected engine crash rolls back.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from retrain_assets.machines import store
from retrain_assets.machines.step import Context, Step
from retrain_assets.machines.table import Machine, State
from retrain_assets.store.database import transaction


class NoRun(LookupError):
    """The customer has no pointer for this machine: no run was ever started."""


@dataclass(frozen=True)
class AdvanceResult:
    """What one advance did: `busy` (another replica holds the lock) or the new pointer."""

    busy: bool
    pointer: store.Pointer | None
    steps: int

    @property
    def waiting(self) -> bool:
        """Return True when the run yielded and waits for a later advance."""
        return self.pointer is not None and self.pointer.status == "waiting"

    @property
    def finished(self) -> bool:
        """Return True when the run is in a terminal state."""
        return self.pointer is not None and self.pointer.terminal


def advance(
    url: str,
    machine: Machine,
    customer: str,
    services: Any,
    *,
    known: Mapping[str, Any] | None = None,
) -> AdvanceResult:
    """Run the customer's machine from its pointer until it yields or ends.

    Args:
        url: the project database.
        machine: the table to run.
        customer: whose run.
        services: handed to every transition in its context.
        known: facts the caller already fetched (e.g. a batched status call), in the context.

    Raises:
        NoRun: no run was ever started for this customer and machine.
    """
    with transaction(url) as cur:
        current = store.read_pointer(cur, machine.name, customer, lock=True)
        if current is None:
            if store.read_pointer(cur, machine.name, customer) is None:
                raise NoRun(f"no {machine.name} run was started for {customer}")
            return AdvanceResult(busy=True, pointer=None, steps=0)
        if current.terminal:
            return AdvanceResult(busy=False, pointer=current, steps=0)
        # Everything below runs under the row lock and commits together, history included.
        final, steps = _trampoline(cur, machine, current, services, dict(known or {}))
        return AdvanceResult(busy=False, pointer=store.save_pointer(cur, final), steps=steps)


def _trampoline(
    cur: Any, machine: Machine, p: store.Pointer, services: Any, known: dict[str, Any]
) -> tuple[store.Pointer, int]:
    """Loop over steps until a terminal state or a yield; return the pointer to save."""
    steps = 0
    while p.state not in machine.terminal:
        state = machine.states.get(p.state)
        if state is None:
            raise RuntimeError(f"{machine.name} has no state {p.state} (pointer of {p.customer})")
        visit = p.visits.get(p.state, 0) + 1
        if state.max_visits is not None and visit > state.max_visits:
            return _over_budget(cur, machine, p, state.max_visits, visit), steps
        p, stays = _visit(cur, machine, p, state, visit, services, known)
        steps += 1
        if stays:
            break
    if p.state in machine.terminal and not p.terminal:  # e.g. an operator repointed it
        p = dataclasses.replace(p, status="terminal")
    return p, steps


def _visit(
    cur: Any,
    machine: Machine,
    p: store.Pointer,
    state: State,
    visit: int,
    services: Any,
    known: dict[str, Any],
) -> tuple[store.Pointer, bool]:
    """Run one visit, record it, and return the moved pointer and whether to stop (a yield)."""
    started = _now()
    context = Context(
        machine=machine.name, customer=p.customer, run_key=p.run_key, state=p.state,
        visit=visit, payload=MappingProxyType(dict(p.payload)), services=services,
        known=MappingProxyType(known),
    )
    step = run_transition(state, context)
    target, stays = _route(p.state, state, step)
    row = store.NewHistory(
        p.state, visit, step.ok, stays, target, step.error, step.note, started, _now()
    )
    store.append_history(cur, p, row)
    ends = target in machine.terminal
    return dataclasses.replace(
        p,
        state=target,
        status="terminal" if ends else "waiting",
        payload={**p.payload, **step.payload},
        visits={**p.visits, p.state: visit},
        last_error=p.last_error if step.ok else step.error,
        reason=(step.error or step.note) if ends else None,
    ), stays


def _over_budget(
    cur: Any, machine: Machine, p: store.Pointer, budget: int, visit: int
) -> store.Pointer:
    """End the run in the failed state without running the state that is over budget."""
    reason = f"max retries reached: {p.state} would exceed its budget of {budget} visits"
    if p.last_error:
        reason += f"; last error: {p.last_error}"
    now = _now()
    row = store.NewHistory(
        p.state, visit, False, False, machine.failed, reason, "not run", now, now
    )
    store.append_history(cur, p, row)
    return dataclasses.replace(p, state=machine.failed, status="terminal", reason=reason)


def run_transition(state: State, context: Context[Any]) -> Step:
    """Run one transition inside THE error boundary of the machine.

    Any exception, and any result the table cannot route (not a Step, a yield where the
    state may not yield, an unknown branch, a payload that is not JSON), becomes a failed
    step whose error names the exception type and message; the table's on_failure decides
    what happens next. Exceptions that are not `Exception` (KeyboardInterrupt) still abort.
    """
    try:
        step = state.transition(context)
        _check_step(state, step)
    except Exception as exc:
        return Step.failure(f"{type(exc).__name__}: {exc}")
    return step


def _check_step(state: State, step: object) -> None:
    if not isinstance(step, Step):
        raise TypeError(f"transition returned {type(step).__name__}, not a Step")
    if step.yielded and not state.may_yield:
        raise ValueError("transition yielded in a state that may not yield")
    if step.branch is not None and step.branch not in state.branches:
        raise ValueError(f"transition chose unknown branch {step.branch!r}")
    json.dumps(dict(step.payload), allow_nan=False)  # what jsonb will accept


def _route(name: str, state: State, step: Step) -> tuple[str, bool]:
    """Return the next state and whether the advance stops here (a yield)."""
    if step.yielded:
        return name, True
    if step.branch is not None:
        target = state.branches[step.branch]
    else:
        target = state.on_success if step.ok else state.on_failure
    return target, target == name and state.may_yield


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)

