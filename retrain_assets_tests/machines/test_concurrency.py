import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from retrain_assets.machines import (
    Machine,
    MachineBusy,
    State,
    Step,
    advance,
    history,
    pointer,
    start_run,
)

TERMINAL = frozenset({"DONE", "FAILED"})


class Gate:
    """Lets a test hold a transition open while another replica tries to advance."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def count(self, state: str) -> None:
        with self.lock:
            self.calls[state] += 1


def held_open(ctx):
    ctx.services.count(ctx.state)
    ctx.services.entered.set()
    assert ctx.services.release.wait(10)
    return Step.success()


def test_a_second_advance_while_one_runs_reports_busy_and_runs_nothing(db):
    machine = Machine("toy", "SUBMIT", TERMINAL, {"SUBMIT": State(held_open, "DONE", "FAILED")})
    gate = Gate()
    start_run(db, machine, "acme", "k1")
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(advance, db, machine, "acme", gate)
        assert gate.entered.wait(10)
        second = advance(db, machine, "acme", gate)
        assert (second.busy, second.pointer, second.steps) == (True, None, 0)
        assert start_run(db, machine, "acme", "k1").state == "SUBMIT"  # same key: a no-op
        with pytest.raises(MachineBusy, match="being advanced"):
            start_run(db, machine, "acme", "k2")
        gate.release.set()
        assert first.result(10).pointer.state == "DONE"
    assert gate.calls == {"SUBMIT": 1}
    assert [h.state for h in history(db, "toy", "acme")] == ["SUBMIT"]


def slow_poll(ctx):
    ctx.services.count(f"{ctx.state}#{ctx.visit}")
    time.sleep(0.005)
    if ctx.visit < 12:
        return Step.wait()
    return Step.success()


def slow_step(ctx):
    ctx.services.count(f"{ctx.state}#{ctx.visit}")
    time.sleep(0.005)
    return Step.success()


def test_concurrent_replicas_never_run_the_same_visit_twice(db):
    machine = Machine(
        "toy",
        "A",
        TERMINAL,
        {
            "A": State(slow_step, "POLL", "FAILED"),
            "POLL": State(slow_poll, "B", "FAILED", may_yield=True, max_visits=50),
            "B": State(slow_step, "DONE", "FAILED"),
        },
    )
    gate = Gate()
    start_run(db, machine, "acme", "k1")
    barrier = threading.Barrier(6)

    def replica() -> list[bool]:
        barrier.wait()
        outcomes = []
        while (p := pointer(db, "toy", "acme")) is not None and not p.terminal:
            outcomes.append(advance(db, machine, "acme", gate).busy)
        return outcomes

    with ThreadPoolExecutor(6) as pool:
        outcomes = [busy for f in [pool.submit(replica) for _ in range(6)] for busy in f.result()]
    assert outcomes.count(False) >= 12  # someone drove every poll to the end
    assert True in outcomes  # and the replicas really did collide on the lock
    assert all(n == 1 for n in gate.calls.values()), gate.calls
    assert len(gate.calls) == 14  # A, POLL visits 1..12, B
    rows = history(db, "toy", "acme")
    assert [(h.state, h.visit) for h in rows] == (
        [("A", 1)] + [("POLL", v) for v in range(1, 13)] + [("B", 1)]
    )
