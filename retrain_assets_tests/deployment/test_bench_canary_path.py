"""One canary, two drivers: the controller (`advance_rollouts`, Postgres) and the benchmark's.

The decision benchmark drives the rollout machine without a database (`hindsight_canary.py`).
Fed the same served rows (read back from the prediction log with the controller's own
queries) at the same clock times, it must reach the same states, the same analyses and the
same outcome; a change to either path that parts them fails here.
"""

from __future__ import annotations

import pytest

from retrain_assets.deployment.observations import (
    DueStep,
    canary_pairs,
    join_actuals,
    read_actuals,
    step_counts,
)
from retrain_assets.deployment.rollout_machine import NAME, rollout_machine
from retrain_assets.machines.store import pointer
from retrain_assets.store.database import transaction
from retrain_assets_tests.benchmarks.bench_path import bench_module
from retrain_assets_tests.deployment.conftest import DAYS, RolloutWorld

canary = bench_module("hindsight_canary")


def _rows(db: str, sql: str) -> list[tuple]:
    with transaction(db) as cur:
        cur.execute(sql)
        return cur.fetchall()


def _feed(world: RolloutWorld, run: canary.CanaryRun) -> None:
    """Give the benchmark's run what the prediction log holds, as the controller reads it."""
    if run.weight is None:
        return
    step = DueStep(run.rollout_id, run.customer, run.state)
    run.requests[run.state] = step_counts(world.db, [step]).get(run.rollout_id, (0,))[0]
    pairs = canary_pairs(world.db, [run.rollout_id], DAYS)
    run.pairs = [join_actuals(pairs, read_actuals(world.features, DAYS))]


@pytest.mark.parametrize(
    ("champion", "candidate", "serves", "outcome"),
    [
        (1.3, 1.05, True, "promoted"),
        (1.1, 1.6, True, "rolled_back"),
        (1.0, 1.0, False, "rolled_back"),
    ],
    ids=["promoted", "rolled back", "no data"],
)
def test_a_canary_goes_the_same_way_through_the_controller_and_the_benchmark(
    world: RolloutWorld, champion: float, candidate: float, serves: bool, outcome: str
) -> None:
    started = world.deploy("acme", "2", champion="1")
    run = canary.start_run("acme", started.rollout.id, "2", "1")
    machine = rollout_machine(world.settings)
    models = {"1": world.model("acme", champion), "2": world.model("acme", candidate)}
    for _ in range(8):
        world.advance()
        _feed(world, run)
        canary.tick(machine, run, world.settings, world.clock.now, 0.0)
        found = pointer(world.db, NAME, "acme")
        assert found is not None and found.state == run.state
        if serves and run.weight is not None:
            world.serve("acme", models)
        world.clock.forward(61)
    assert run.outcome == outcome
    assert _rows(world.db, "SELECT outcome, reason FROM rollouts") == [(run.outcome, run.reason)]
    analyses = _rows(
        world.db,
        "SELECT step, outcome, rows_with_actuals, reason FROM rollout_analyses ORDER BY id",
    )
    assert analyses == [(a.step, a.outcome, a.rows_with_actuals, a.reason) for a in run.analyses]
