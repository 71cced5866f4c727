"""`advance_many`: the set-based advance a sensor tick uses, checked against `advance`."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from retrain_assets.machines import (
    Machine,
    NoRun,
    State,
    Step,
    advance,
    advance_many,
    history,
    pointer,
    start_run,
)
from retrain_assets.store.database import transaction
from retrain_assets_tests.machines.toy_machines import TERMINAL, Toy, waiting_machine

CUSTOMERS = [f"c{i:02d}" for i in range(7)]


def comparable(db, machine, customer):
    """A run's stored outcome without ids and timestamps, to compare two ways of advancing."""
    p = pointer(db, machine, customer)
    rows = [
        (h.state, h.visit, h.ok, h.yielded, h.next_state, h.error, h.note)
        for h in history(db, machine, customer)
    ]
    return (p.state, p.status, p.payload, p.visits, p.reason, p.last_error), rows


def test_advance_many_stores_exactly_what_advance_would(db):
    machine = waiting_machine()
    one_by_one, batched = CUSTOMERS[:3], CUSTOMERS[3:6]
    for customer in one_by_one + batched:
        start_run(db, machine, customer, f"{customer}-k", {"seen": 0})
    toy = Toy()
    for _ in range(2):  # start and first wait, then a second wait
        for customer in one_by_one:
            advance(db, machine, customer, toy)
        results = advance_many(db, machine, batched, toy, chunk=2)
    assert sorted(results) == batched
    assert all(r.waiting and r.steps == 1 and r.error is None for r in results.values())
    toy.ready = True
    for customer in one_by_one:
        advance(db, machine, customer, toy)
    finished = advance_many(db, machine, batched, toy, chunk=2)
    assert all(r.finished and r.pointer.reason == "ready" for r in finished.values())
    assert finished["c03"].pointer == pointer(db, "toy", "c03")
    for mine, theirs in zip(one_by_one, batched, strict=True):
        assert comparable(db, "toy", theirs) == comparable(db, "toy", mine)
    again = advance_many(db, machine, batched, toy)
    assert all(r.steps == 0 and r.finished for r in again.values())


def test_a_budget_overrun_is_recorded_the_same_way(db):
    machine = waiting_machine().with_budgets({"WAIT": 2})
    start_run(db, machine, "c00", "k")
    toy = Toy()
    for _ in range(3):
        result = advance_many(db, machine, ["c00"], toy)["c00"]
    assert result.pointer.state == "FAILED"
    assert result.pointer.reason.startswith("max retries reached: WAIT would exceed")
    assert [h.note for h in history(db, "toy", "c00")][-1] == "not run"


def test_a_customer_another_replica_holds_is_reported_busy_and_left_alone(db):
    machine = waiting_machine()
    for customer in CUSTOMERS[:3]:
        start_run(db, machine, customer, "k", {"seen": 0})
    holding, release = threading.Event(), threading.Event()

    def hold_c01() -> None:
        with transaction(db) as cur:
            cur.execute("SELECT 1 FROM machine_pointers WHERE customer = 'c01' FOR UPDATE")
            holding.set()
            assert release.wait(10)

    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(hold_c01)
        assert holding.wait(10)
        results = advance_many(db, machine, CUSTOMERS[:3], Toy())
        release.set()
        held.result(10)
    assert (results["c01"].busy, results["c01"].pointer) == (True, None)
    assert results["c00"].waiting and results["c02"].waiting
    assert history(db, "toy", "c01") == []


def broken_for_c01(ctx):
    if ctx.customer == "c01":
        return Step.success(payload={"not json": {1, 2}})  # the error boundary routes this
    return Step.success()


def test_engine_faults_save_nothing_for_that_customer_and_the_rest_commits(db):
    machine = Machine("toy", "A", TERMINAL, {"A": State(broken_for_c01, "DONE", "FAILED")})
    for customer in CUSTOMERS[:3]:
        start_run(db, machine, customer, "k")
    with transaction(db) as cur:  # an operator typo: a state the table does not have
        cur.execute("UPDATE machine_pointers SET state = 'NOPE' WHERE customer = 'c02'")
    results = advance_many(db, machine, CUSTOMERS[:3], None)
    assert results["c00"].pointer.state == "DONE"
    assert results["c01"].pointer.state == "FAILED"  # a transition's error is routed
    assert "TypeError" in results["c01"].pointer.reason
    assert results["c02"].error == "RuntimeError: toy has no state NOPE (pointer of c02)"
    assert (pointer(db, "toy", "c02").state, history(db, "toy", "c02")) == ("NOPE", [])


def test_chunks_after_the_deadline_are_left_for_the_next_call(db):
    machine = waiting_machine()
    for customer in CUSTOMERS:
        start_run(db, machine, customer, "k", {"seen": 0})
    assert advance_many(db, machine, CUSTOMERS, Toy(), deadline=time.monotonic() - 1) == {}
    assert all(pointer(db, "toy", c).status == "ready" for c in CUSTOMERS)


def test_a_customer_without_a_run_is_named_and_its_chunk_rolls_back(db):
    machine = waiting_machine()
    start_run(db, machine, "c00", "k", {"seen": 0})
    with pytest.raises(NoRun, match="no toy run was started for ghost"):
        advance_many(db, machine, ["c00", "ghost"], Toy())
    assert history(db, "toy", "c00") == []
    with pytest.raises(ValueError, match="chunk must be at least 1"):
        advance_many(db, machine, ["c00"], Toy(), chunk=0)
