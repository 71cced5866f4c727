"""A toy machine for the engine's tests: a state that waits until its services say ready."""

from __future__ import annotations

from collections import Counter

from retrain_assets.machines import Machine, State, Step
from retrain_assets.machines.step import Context

TERMINAL = frozenset({"DONE", "FAILED"})


class Toy:
    """Services of the toy machines: a switch, a call counter and stack depths."""

    def __init__(self) -> None:
        self.ready = False
        self.calls: Counter[str] = Counter()
        self.depths: list[int] = []


def begin(ctx: Context[Toy]) -> Step:
    """Count the visit and the times BEGIN ran for this run."""
    ctx.services.calls["BEGIN"] += 1
    return Step.success("begun", payload={"seen": ctx.payload.get("seen", 0) + 1})


def wait_until_ready(ctx: Context[Toy]) -> Step:
    """Wait (yield) until the toy is ready."""
    ctx.services.calls["WAIT"] += 1
    return Step.success("ready") if ctx.services.ready else Step.wait("not yet")


def waiting_machine() -> Machine:
    """BEGIN, then WAIT until ready, then DONE."""
    return Machine(
        "toy",
        "BEGIN",
        TERMINAL,
        {
            "BEGIN": State(begin, "WAIT", "FAILED"),
            "WAIT": State(wait_until_ready, "DONE", "WAIT", may_yield=True, max_visits=10),
        },
    )
