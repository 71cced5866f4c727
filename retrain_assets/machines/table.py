"""A machine is data: a table of states, checked once when the machine is built.

Routing lives in the table rather than in transition code, so the engine can record every
move, the diagram can be rendered from the same object the engine runs, and a typo in a
target state fails at import time instead of in the middle of a five-hour run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from retrain_assets.machines.backoff import Backoff
from retrain_assets.machines.step import Context, Step

Transition = Callable[[Context[Any]], Step]
# (payload, prefetched) -> the note of a visit certain to wait in place, or None: run it
KnownWait = Callable[[Mapping[str, Any], Mapping[str, Any]], str | None]
EdgeKind = Literal["success", "failure", "branch"]


class MachineDefinitionError(ValueError):
    """The state table is inconsistent; the message names the offending state."""


DONE = "DONE"  # the terminal state of a run that finished its work
FAILED = "FAILED"  # the terminal state of a run over a budget (`Machine.failed`)


@dataclass(frozen=True)
class State:
    """One row of the table.

    Attributes:
        transition: the function run on each visit.
        on_success: next state after an ok step.
        on_failure: next state after a failed step (including any exception).
        may_yield: the state may pause the machine; moving back to itself also pauses.
        max_visits: visits allowed per run (None: unlimited); one more ends the run in the
            machine's failed state with "max retries reached".
        branches: extra named exits (label -> state) a step selects with `Step.branch`.
        known_wait: for a state that may yield, the visit the caller's facts already decide:
            given the run's payload and the prefetched facts, the note of a visit that is
            certain to be `Step.wait(note)` (no payload change, nothing called), else None.
            `advance_many` then records that visit in SQL without running the transition
            (the same history row, the same visit count); None always runs the transition.
        backoff: a retry of this state (any visit after its first in a run) waits: the engine
            records when it is due and yields, and no advance visits it before then.
    """

    transition: Transition
    on_success: str
    on_failure: str
    may_yield: bool = False
    max_visits: int | None = None
    branches: Mapping[str, str] = field(default_factory=dict)
    known_wait: KnownWait | None = None
    backoff: Backoff | None = None


@dataclass(frozen=True)
class Edge:
    """One arrow of the table: from a state to a target, and why."""

    source: str
    target: str
    kind: EdgeKind
    label: str


@dataclass(frozen=True)
class Machine:
    """A named state table with its initial state and terminal states.

    `failed` is the terminal state a run enters when a state would exceed its budget.
    """

    name: str
    initial: str
    terminal: frozenset[str]
    states: Mapping[str, State]
    failed: str = FAILED

    def __post_init__(self) -> None:
        """Refuse an inconsistent table, naming the state at fault."""
        _validate(self)

    def edges(self) -> Iterator[Edge]:
        """Yield every arrow of the table (success, failure, then named branches)."""
        for name, state in self.states.items():
            yield Edge(name, state.on_success, "success", "ok")
            yield Edge(name, state.on_failure, "failure", "failed")
            for label, target in state.branches.items():
                yield Edge(name, target, "branch", label)

    def with_budgets(self, budgets: Mapping[str, int | None]) -> Machine:
        """Return a copy whose named states get new visit budgets."""
        unknown = sorted(set(budgets) - set(self.states))
        if unknown:
            raise MachineDefinitionError(f"{self.name}: no state {', '.join(unknown)} to budget")
        states = {
            name: dataclasses.replace(state, max_visits=budgets[name]) if name in budgets else state
            for name, state in self.states.items()
        }
        return dataclasses.replace(self, states=states)


def _validate(machine: Machine) -> None:
    def fail(message: str) -> None:
        raise MachineDefinitionError(f"machine {machine.name!r}: {message}")

    known = set(machine.states) | set(machine.terminal)
    for name in sorted(known):
        if not name.isidentifier():
            fail(f"state name {name!r} is not an identifier")
    for name in sorted(set(machine.states) & set(machine.terminal)):
        fail(f"terminal state {name} must not have a transition")
    if machine.initial not in machine.states:
        fail(f"initial state {machine.initial} is not a non-terminal state of the table")
    if machine.failed not in machine.terminal:
        fail(f"failed state {machine.failed} is not one of the terminal states")
    for name, state in machine.states.items():
        if not callable(state.transition):
            fail(f"state {name} has no callable transition")
        if state.max_visits is not None and state.max_visits < 1:
            fail(f"state {name} has a budget of {state.max_visits}; use None or >= 1")
        if state.known_wait is not None and not state.may_yield:
            fail(f"state {name} has a known_wait but may not yield")
    for edge in machine.edges():
        if edge.target not in known:
            fail(f"state {edge.source} {edge.kind} edge {edge.label!r} -> unknown {edge.target}")
        if any(c in edge.label for c in ":;\n") or not edge.label.strip():
            fail(f"state {edge.source} has a branch label {edge.label!r} unfit for a diagram")
    reachable = _reachable(machine)
    for name in sorted(known - reachable):
        fail(f"state {name} is unreachable from {machine.initial}")
    loop = _unbudgeted_cycle(machine)
    if loop:
        fail(f"states {' -> '.join(loop)} form a cycle without a visit budget")


def _targets(machine: Machine, name: str) -> set[str]:
    state = machine.states.get(name)
    if state is None:
        return set()
    over_budget = {machine.failed} if state.max_visits is not None else set()
    return {state.on_success, state.on_failure, *state.branches.values(), *over_budget}


def _reachable(machine: Machine) -> set[str]:
    seen, todo = {machine.initial}, [machine.initial]
    while todo:
        for target in _targets(machine, todo.pop()) - seen:
            seen.add(target)
            todo.append(target)
    return seen


def _unbudgeted_cycle(machine: Machine) -> list[str]:
    """Return one cycle made only of unbudgeted states (it could loop forever), else []."""
    free = {n for n, s in machine.states.items() if s.max_visits is None}
    colour: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(free):
        if colour.get(start):
            continue
        path, stack = [start], [iter(sorted(_targets(machine, start) & free))]
        colour[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                colour[path.pop()] = 2
                stack.pop()
            elif colour.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif not colour.get(nxt):
                colour[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(_targets(machine, nxt) & free)))
    return []
