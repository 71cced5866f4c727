"""The flat trampoline: run one customer's machine until a terminal state or a yield.

One advance is one transaction holding the pointer's row lock (`FOR UPDATE SKIP LOCKED`), so
two replicas never drive the same customer: the second one sees the lock and reports busy at
once. Steps run in a plain loop, never by recursion, so a state visited a thousand times costs
a thousand loop turns, not a thousand stack frames. History rows are written in the same
transaction and committed with the pointer; only an unexpected engine crash rolls back.

`advance_many` is the same trampoline for a sensor tick over thousands of customers: one
connection, and per chunk one transaction with one locking select, one history insert and one
pointer update, so a tick costs a few round trips per chunk instead of a connection per customer.
Given the pointers its caller already read (`known`), the visits a state's `known_wait`
decides from those facts alone (a poll whose job is still queued) skip the trampoline: one
statement per chunk locks those pointers, counts the visit and appends its history row.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from retrain_assets.machines import store
from retrain_assets.machines.backoff import RETRY_AT, describe_due, retry_marker, retry_pending
from retrain_assets.machines.step import Context, Step
from retrain_assets.machines.table import Machine, State
from retrain_assets.store.database import connection, transaction

Record = Callable[[store.Pointer, store.NewHistory], None]  # where history rows go
# (cursor, chunk results); what it returns is ignored
BeforeCommit = Callable[[Any, Mapping[str, "AdvanceResult"]], object]


class NoRun(LookupError):
    """The customer has no pointer for this machine: no run was ever started."""


@dataclass(frozen=True)
class AdvanceResult:
    """What one advance did: `busy` (another replica holds the lock) or the new pointer."""

    busy: bool
    pointer: store.Pointer | None
    steps: int
    error: str | None = None  # an engine fault (not a transition's): nothing was saved

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
    prefetched: Mapping[str, Any] | None = None,
) -> AdvanceResult:
    """Run the customer's machine from its pointer until it yields or ends.

    Args:
        url: the project database.
        machine: the table to run.
        customer: whose run.
        services: handed to every transition in its context.
        prefetched: facts the caller already fetched (e.g. a batched status call), in the context.

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
        def record(p: store.Pointer, row: store.NewHistory) -> None:
            store.append_history(cur, p, row)

        final, steps = _trampoline(record, machine, current, services, dict(prefetched or {}))
        if final is current:  # a retry not due yet: nothing ran, nothing to write
            return AdvanceResult(busy=False, pointer=current, steps=0)
        return AdvanceResult(busy=False, pointer=store.save_pointer(cur, final), steps=steps)


def advance_many(
    url: str,
    machine: Machine,
    customers: Sequence[str],
    services: Any,
    *,
    prefetched: Mapping[str, Any] | None = None,
    chunk: int = 500,
    deadline: float | None = None,
    before_commit: BeforeCommit | None = None,
    known: Mapping[str, store.Pointer] | None = None,
) -> dict[str, AdvanceResult]:
    """Advance many customers' runs, as `advance` would one by one, with set-based writes.

    Each chunk is one transaction: its pointers are locked with one `FOR UPDATE SKIP LOCKED`
    select (a customer another replica holds is reported busy), every trampoline runs in
    Python with its history rows kept in memory, then all history rows go in with one INSERT
    and all pointers with one UPDATE. An engine fault for one customer (not a transition's
    failure, which the table routes) is reported in that customer's result and saves nothing
    for it; the rest of the chunk commits.

    With `known`, a customer whose known pointer sits in a state with a `known_wait` that
    returns a note for it (and is below the state's budget) is recorded first, in SQL
    (`store.record_waits`): the same history row and visit count the trampoline would write,
    and only if the pointer is still as known. Whoever that statement leaves out (changed
    since, busy, at the budget) goes through the trampoline like everyone else.

    Args:
        url: the project database.
        machine: the table to run.
        customers: whose runs; each must have been started.
        services: handed to every transition in its context.
        prefetched: facts the caller already fetched, for each run's first visit.
        chunk: customers per transaction (row locks held together).
        deadline: a `time.monotonic()` value; chunks not started by then are left out of the
            result, untouched, for the next call.
        before_commit: called with the chunk's cursor and results after its pointers are
            written and before it commits, so rows the transitions produced (kept by the
            caller's services) commit with the pointers they belong to, or not at all.
        known: pointers the caller read before the advance, by customer (e.g. the tick's due
            list); only used to find the visits `known_wait` decides.

    Raises:
        NoRun: a customer has no run of this machine (its chunk is rolled back).
    """
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1, not {chunk}")
    results: dict[str, AdvanceResult] = {}
    facts = dict(prefetched or {})
    with connection(url) as conn:
        for start in range(0, len(customers), chunk):
            if deadline is not None and time.monotonic() >= deadline:
                break
            part = customers[start : start + chunk]
            with conn, conn.cursor() as cur:
                done = _record_known_waits(cur, machine, part, known or {}, facts)
                rest = [c for c in part if c not in done]
                if rest:
                    done.update(_advance_chunk(cur, machine, rest, services, facts))
                if before_commit is not None:
                    before_commit(cur, done)
                results.update(done)
    return results


def _record_known_waits(
    cur: Any,
    machine: Machine,
    customers: Sequence[str],
    known: Mapping[str, store.Pointer],
    prefetched: Mapping[str, Any],
) -> dict[str, AdvanceResult]:
    """Record the chunk's visits that `known_wait` decides, one statement per state."""
    by_state: dict[str, dict[str, tuple[store.Pointer, str]]] = {}
    for customer in customers:
        p = known.get(customer)
        note = None if p is None else _known_note(machine, p, prefetched)
        if p is not None and note is not None:
            by_state.setdefault(p.state, {})[customer] = (p, note)
    results: dict[str, AdvanceResult] = {}
    for name, waits in by_state.items():
        budget = machine.states[name].max_visits
        rows = [store.KnownWait(c, p.updated_at, note) for c, (p, note) in waits.items()]
        for customer, visit, at in store.record_waits(cur, machine.name, name, budget, rows):
            waited = _waited(waits[customer][0], visit, at)
            results[customer] = AdvanceResult(busy=False, pointer=waited, steps=1)
    return results


def _known_note(machine: Machine, p: store.Pointer, prefetched: Mapping[str, Any]) -> str | None:
    """Return the note of the pointer's next visit if its state's `known_wait` decides it.

    None whenever the trampoline must run: a terminal run, a state without a known_wait, a
    visit over the budget (the trampoline ends the run), or a known_wait that raised.
    """
    state = machine.states.get(p.state)
    if p.terminal or state is None or state.known_wait is None:
        return None
    if state.max_visits is not None and p.visits.get(p.state, 0) >= state.max_visits:
        return None
    try:
        return state.known_wait(p.payload, prefetched)
    except Exception:  # the transition's error boundary will say what is wrong
        return None


def _waited(p: store.Pointer, visit: int, updated_at: dt.datetime) -> store.Pointer:
    """Return the pointer as `_visit` leaves it after a wait in place (built, not read back)."""
    return store.Pointer(
        p.machine,
        p.customer,
        p.run_key,
        p.state,
        "waiting",
        p.payload,
        {**p.visits, p.state: visit},
        None,
        p.last_error,
        p.started_at,
        updated_at,
    )


def rows_into(rows: list[tuple[store.Pointer, store.NewHistory]]) -> Record:
    """Return a recorder that keeps history rows in `rows` for one bulk insert."""

    def record(p: store.Pointer, row: store.NewHistory) -> None:
        rows.append((p, row))

    return record


def _advance_chunk(
    cur: Any, machine: Machine, customers: Sequence[str], services: Any, prefetched: dict[str, Any]
) -> dict[str, AdvanceResult]:
    """Advance one chunk inside the caller's transaction; see `advance_many`."""
    locked = {p.customer: p for p in store.lock_pointers(cur, machine.name, customers)}
    missing = set(customers) - locked.keys()
    if missing:
        absent = sorted(missing - store.existing_customers(cur, machine.name, sorted(missing)))
        if absent:
            raise NoRun(f"no {machine.name} run was started for {', '.join(absent)}")
    results = {c: AdvanceResult(busy=True, pointer=None, steps=0) for c in missing}
    history: list[tuple[store.Pointer, store.NewHistory]] = []
    moved: dict[str, int] = {}
    for customer, current in locked.items():
        if current.terminal:
            results[customer] = AdvanceResult(busy=False, pointer=current, steps=0)
            continue
        rows: list[tuple[store.Pointer, store.NewHistory]] = []
        try:
            final, steps = _trampoline(rows_into(rows), machine, current, services, prefetched)
        except Exception as exc:  # an engine fault: report it, save nothing for this one
            error = f"{type(exc).__name__}: {exc}"
            results[customer] = AdvanceResult(False, current, 0, error=error)
            continue
        if final is current:  # a retry not due yet: nothing ran, nothing to write
            results[customer] = AdvanceResult(busy=False, pointer=current, steps=0)
            continue
        history.extend(rows)
        locked[customer], moved[customer] = final, steps
    store.append_histories(cur, history)
    for saved in store.save_pointers(cur, [locked[c] for c in moved]):
        results[saved.customer] = AdvanceResult(False, saved, moved[saved.customer])
    return results


def _trampoline(
    record: Record, machine: Machine, p: store.Pointer, services: Any, prefetched: dict[str, Any]
) -> tuple[store.Pointer, int]:
    """Loop over steps until a terminal state or a yield; return the pointer to save.

    `prefetched` reaches the first visit only: the caller fetched it before this advance, and once
    a transition has acted (e.g. resubmitted a failed job) those facts are stale. A state whose
    retry is not due yet (`backoff.RETRY_AT`) is not visited: the same pointer comes back.
    """
    steps = 0
    while p.state not in machine.terminal:
        state = machine.states.get(p.state)
        if state is None:
            raise RuntimeError(f"{machine.name} has no state {p.state} (pointer of {p.customer})")
        if retry_pending(p.payload, p.state, _now()):
            break
        visit = p.visits.get(p.state, 0) + 1
        if state.max_visits is not None and visit > state.max_visits:
            return _over_budget(record, machine, p, state.max_visits, visit), steps
        p, stays = _visit(
            record, machine, p, state, visit, services, prefetched if not steps else {}
        )
        steps += 1
        if stays:
            break
    if p.state in machine.terminal and not p.terminal:  # e.g. an operator repointed it
        p = dataclasses.replace(p, status="terminal")
    return p, steps


def _visit(
    record: Record,
    machine: Machine,
    p: store.Pointer,
    state: State,
    visit: int,
    services: Any,
    prefetched: dict[str, Any],
) -> tuple[store.Pointer, bool]:
    """Run one visit, record it, and return the moved pointer and whether to stop (a yield)."""
    started = _now()
    payload = {k: v for k, v in p.payload.items() if k != RETRY_AT}  # the wait is over
    context = Context(
        machine=machine.name,
        customer=p.customer,
        run_key=p.run_key,
        state=p.state,
        visit=visit,
        payload=MappingProxyType(dict(payload)),
        services=services,
        prefetched=MappingProxyType(prefetched),
    )
    step = run_transition(state, context)
    target, stays = route(p.state, state, step)
    payload.update(step.payload)
    visits = {**p.visits, p.state: visit}
    note = step.note
    if not stays:
        waits = _retry_wait(machine, target, visits)
        if waits is not None:
            payload[RETRY_AT], due_note = waits
            note, stays = (f"{note}; {due_note}" if note else due_note), True
    row = store.NewHistory(
        p.state, visit, step.ok, stays, target, step.error, note, started, _now()
    )
    record(p, row)
    ends = target in machine.terminal
    kept = p.last_error if step.ok else step.error
    last_error = None if step.clear_error else kept
    return dataclasses.replace(
        p,
        state=target,
        status="terminal" if ends else "waiting",
        payload=payload,
        visits=visits,
        last_error=last_error,
        reason=(step.error or step.note) if ends else None,
    ), stays


def _retry_wait(
    machine: Machine, target: str, visits: Mapping[str, int]
) -> tuple[dict[str, str], str] | None:
    """Return the wait (payload marker, history words) before a retry of `target`, if any.

    A state with a `backoff` that was already visited in this run is retried no sooner than
    its backoff's delay; a retry its budget would refuse is not waited for (the run fails now).
    """
    state = machine.states.get(target)
    if state is None or state.backoff is None:
        return None
    done = visits.get(target, 0)
    budget = state.max_visits
    if done < 1 or (budget is not None and done >= budget):
        return None
    now = _now()
    at = now + dt.timedelta(seconds=state.backoff.delay(done))
    return retry_marker(target, at), describe_due(target, at, now, done + 1, budget)


def _over_budget(
    record: Record, machine: Machine, p: store.Pointer, budget: int, visit: int
) -> store.Pointer:
    """End the run in the failed state without running the state that is over budget."""
    reason = f"max retries reached: {p.state} would exceed its budget of {budget} visits"
    if p.last_error:
        reason += f"; last error: {p.last_error}"
    now = _now()
    row = store.NewHistory(
        p.state, visit, False, False, machine.failed, reason, "not run", now, now
    )
    record(p, row)
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


def route(name: str, state: State, step: Step) -> tuple[str, bool]:
    """Return the next state and whether the advance stops here (a yield).

    Public so that a driver without the database (the decision benchmark) routes a step
    through the table exactly as the engine does.
    """
    if step.yielded:
        return name, True
    if step.branch is not None:
        target = state.branches[step.branch]
    else:
        target = state.on_success if step.ok else state.on_failure
    return target, target == name and state.may_yield


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
