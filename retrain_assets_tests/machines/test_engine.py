import traceback
from collections import Counter

import psycopg2
import pytest

from retrain_assets.machines import (
    Machine,
    NoRun,
    RunActive,
    State,
    Step,
    advance,
    history,
    pointer,
    pointers_in_state,
    start_run,
)
from retrain_assets.store.database import transaction
from retrain_assets_tests.machines.toy_machines import (
    TERMINAL,
    Toy,
    begin,
    waiting_machine,
)


def single(transition, on_failure="DONE", **extra) -> Machine:
    return Machine("toy", "A", TERMINAL, {"A": State(transition, "DONE", on_failure, **extra)})


def test_trampoline_runs_to_a_yield_persists_and_resumes(db):
    machine, toy = waiting_machine(), Toy()
    start_run(db, machine, "acme", "k1", {"seen": 0})
    first = advance(db, machine, "acme", toy)
    assert (first.busy, first.waiting, first.steps) == (False, True, 2)
    stored = pointer(db, "toy", "acme")
    assert stored == first.pointer
    assert (stored.state, stored.status) == ("WAIT", "waiting")
    assert stored.visits == {"BEGIN": 1, "WAIT": 1}
    assert stored.payload == {"seen": 1}
    assert [(h.state, h.ok, h.yielded, h.next_state) for h in history(db, "toy", "acme")] == [
        ("BEGIN", True, False, "WAIT"),
        ("WAIT", True, True, "WAIT"),
    ]
    assert advance(db, machine, "acme", Toy()).pointer.visits["WAIT"] == 2
    toy.ready = True
    done = advance(db, machine, "acme", toy)
    assert (done.finished, done.steps, done.pointer.state, done.pointer.reason) == (
        True,
        1,
        "DONE",
        "ready",
    )
    assert toy.calls == {"BEGIN": 1, "WAIT": 2}  # the other WAIT visit ran on another Toy
    assert [h.visit for h in history(db, "toy", "acme", "k1") if h.state == "WAIT"] == [1, 2, 3]
    again = advance(db, machine, "acme", toy)
    assert (again.finished, again.steps) == (True, 0)


def test_an_exception_becomes_a_recorded_failure_transition(db):
    def explode(ctx):
        raise ValueError("bad input for acme")

    machine = Machine(
        "toy",
        "A",
        TERMINAL,
        {"A": State(explode, "DONE", "RECOVER"), "RECOVER": State(begin, "DONE", "FAILED")},
    )
    start_run(db, machine, "acme", "k1")
    result = advance(db, machine, "acme", Toy())
    assert result.pointer.state == "DONE"
    assert result.pointer.last_error == "ValueError: bad input for acme"
    first = history(db, "toy", "acme")[0]
    assert (first.state, first.ok, first.error, first.next_state) == (
        "A",
        False,
        "ValueError: bad input for acme",
        "RECOVER",
    )
    assert first.started_at <= first.finished_at


@pytest.mark.parametrize(
    ("result", "error"),
    [
        (None, "TypeError: transition returned NoneType, not a Step"),
        (Step.wait(), "ValueError: transition yielded in a state that may not yield"),
        (Step.success(branch="other"), "ValueError: transition chose unknown branch 'other'"),
        (Step.success(payload={"when": object()}), "TypeError: Object of type object"),
    ],
)
def test_results_the_table_cannot_route_are_failures_too(db, result, error):
    machine = single(lambda ctx: result, on_failure="FAILED")
    start_run(db, machine, "acme", "k1")
    ended = advance(db, machine, "acme", Toy()).pointer
    assert (ended.state, ended.payload) == ("FAILED", {})
    assert ended.reason.startswith(error)


def test_a_failure_that_stays_in_a_yield_state_waits_for_the_next_advance(db):
    calls = Counter()

    def flaky(ctx):
        calls["A"] += 1
        raise ConnectionError("status endpoint down")

    machine = single(flaky, on_failure="A", may_yield=True, max_visits=5)
    start_run(db, machine, "acme", "k1")
    result = advance(db, machine, "acme", Toy())
    assert (result.waiting, result.steps, calls["A"]) == (True, 1, 1)
    row = history(db, "toy", "acme")[-1]
    assert (row.ok, row.yielded) == (False, True)
    assert row.error == "ConnectionError: status endpoint down"


def test_a_budget_overrun_ends_in_failed_without_running_the_state(db):
    calls = Counter()

    def always_fails(ctx):
        calls["A"] += 1
        raise TimeoutError(f"attempt {ctx.visit}")

    machine = single(always_fails, on_failure="A", max_visits=4)
    start_run(db, machine, "acme", "k1")
    ended = advance(db, machine, "acme", Toy()).pointer
    assert calls["A"] == 4
    assert (ended.state, ended.status) == ("FAILED", "terminal")
    assert ended.reason == (
        "max retries reached: A would exceed its budget of 4 visits;"
        " last error: TimeoutError: attempt 4"
    )
    last = history(db, "toy", "acme")[-1]
    assert (last.state, last.visit, last.ok, last.note, last.next_state) == (
        "A",
        5,
        False,
        "not run",
        "FAILED",
    )
    smaller = machine.with_budgets({"A": 2})
    start_run(db, smaller, "acme", "k2")
    advance(db, smaller, "acme", Toy())
    assert calls["A"] == 6


def test_the_trampoline_is_flat(db):
    toy = Toy()

    def loop(ctx):
        if ctx.visit in (1, 1500):
            toy.depths.append(len(traceback.extract_stack()))
        return Step.success() if ctx.visit == 1500 else Step.failure("again")

    machine = Machine("toy", "A", TERMINAL, {"A": State(loop, "DONE", "A", max_visits=1500)})
    start_run(db, machine, "acme", "k1")
    result = advance(db, machine, "acme", toy)
    assert (result.pointer.state, result.steps) == ("DONE", 1500)
    assert toy.depths[0] == toy.depths[1]


def test_one_active_run_per_customer_and_machine(db):
    machine = waiting_machine()
    first = start_run(db, machine, "acme", "k1", {"seen": 5})
    advance(db, machine, "acme", Toy())
    same = start_run(db, machine, "acme", "k1", {"seen": 99})
    assert (same.state, same.payload, same.started_at) == ("WAIT", {"seen": 6}, first.started_at)
    with pytest.raises(RunActive, match="still running k1 \\(state WAIT\\); refusing to start k2"):
        start_run(db, machine, "acme", "k2")
    other = start_run(db, machine, "globex", "k2")  # another customer is independent
    assert other.state == "BEGIN"
    toy = Toy()
    toy.ready = True
    advance(db, machine, "acme", toy)
    fresh = start_run(db, machine, "acme", "k2", {"seen": 0})
    assert (fresh.run_key, fresh.state, fresh.status, fresh.visits, fresh.payload) == (
        "k2",
        "BEGIN",
        "ready",
        {},
        {"seen": 0},
    )
    assert fresh.reason is None and fresh.started_at > first.started_at
    assert len(history(db, "toy", "acme", "k1")) == 3
    assert history(db, "toy", "acme", "k2") == []


def test_retry_restarts_a_failed_run_of_the_same_key(db):
    machine = single(lambda ctx: Step.failure("no luck"), on_failure="FAILED")
    start_run(db, machine, "acme", "k1")
    assert advance(db, machine, "acme", Toy()).pointer.state == "FAILED"
    assert start_run(db, machine, "acme", "k1").state == "FAILED"
    restarted = start_run(db, machine, "acme", "k1", retry=True)
    assert (restarted.state, restarted.status, restarted.visits) == ("A", "ready", {})


def test_advancing_without_a_run_is_an_error(db):
    with pytest.raises(NoRun, match="no toy run was started for acme"):
        advance(db, waiting_machine(), "acme", Toy())


def test_pointers_in_state_lists_the_waiting_runs(db):
    machine = waiting_machine()
    for customer in ("acme", "globex", "initech"):
        start_run(db, machine, customer, f"key-{customer}")
    advance(db, machine, "acme", Toy())
    advance(db, machine, "initech", Toy())
    waiting = pointers_in_state(db, "toy", "WAIT")
    assert sorted(p.customer for p in waiting) == ["acme", "initech"]
    assert [p.customer for p in pointers_in_state(db, "toy", "BEGIN")] == ["globex"]
    assert pointers_in_state(db, "other", "WAIT") == []


def test_history_is_append_only(db):
    machine = waiting_machine()
    start_run(db, machine, "acme", "k1")
    advance(db, machine, "acme", Toy())
    with pytest.raises(psycopg2.errors.RaiseException, match="append-only"), transaction(db) as cur:
        cur.execute("UPDATE machine_history SET ok = false")
    assert all(h.ok for h in history(db, "toy", "acme"))
