"""The canary with evidence through the real rollout path: Postgres, the machine, the tick.

The prediction log is written as the service writes it (`contract.serve_rows`), the actuals
are materialized `store_day_features` days, the registry is the shared fake: an inconclusive
analysis is recorded with its numbers, extends the step in place (no visit inside the
extension), and the named final rule then decides; `retrain-assets deployments` says so and
the MLflow mirror logs the numbers.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from mlflow.entities import Metric, RunTag

from retrain_assets.deployment.commands import deployment_lines
from retrain_assets.deployment.mirror import mirror_analyses
from retrain_assets.deployment.rollout_machine import NAME
from retrain_assets.machines.store import history
from retrain_assets.store.database import transaction
from retrain_assets.store.snapshots import SnapshotRecord, publish_snapshot
from retrain_assets_tests.deployment.contract import Predict


def rows(db: str, sql: str) -> list[tuple]:
    with transaction(db) as cur:
        cur.execute(sql)
        return cur.fetchall()


def off(seed: str, store: str, item: str, day: dt.date, spread: float) -> float:
    """Return a fixed pseudo-random fraction in [-spread, +spread) for one request key."""
    digest = hashlib.sha256(f"{seed}/{store}/{item}/{day}".encode()).digest()
    return (int.from_bytes(digest[:4], "big") / 2**32 * 2 - 1) * spread


def noisy(world, customer: str, extra: str | None) -> Predict:
    """The champion: off by up to 40 % per key; a canary: the same, plus up to 15 % of its own."""

    def predict(store: str, item: str, day: dt.date) -> float:
        wrong = off("base", store, item, day, 0.4)
        if extra:
            wrong += off(extra, store, item, day, 0.15)
        return world.actuals[(customer, store, item, day)] * (1 + wrong)

    return predict


@dataclass
class LoggedBatches:
    """The one MLflow client call the mirror makes, recorded."""

    batches: list[tuple[str, dict[str, float], dict[str, str]]] = field(default_factory=list)

    def log_batch(self, run_id: str, metrics: list[Metric], tags: list[RunTag]) -> None:
        self.batches.append(
            (run_id, {m.key: m.value for m in metrics}, {t.key: t.value for t in tags})
        )


def test_an_inconclusive_step_is_recorded_extended_and_decided_by_the_final_rule(world):
    for day in world.days:  # the customers' volume: 40 rows with actuals a day each
        publish_snapshot(
            world.db,
            SnapshotRecord(day, f"v2-{day}", "f1", {"acme": 40, "bolt": 40}, False, None, "r"),
        )
    world = world.with_settings(
        canary_rule="evidence", canary_min_rows=12, canary_inconclusive_limit=1, min_predictions=10
    )
    world.deploy("acme", "2", champion="1")
    assert world.advance().results["acme"].pointer.state == "CANARY_10"
    world.serve("acme", {"1": noisy(world, "acme", None), "2": noisy(world, "acme", "canary")})
    world.clock.forward(61)
    first = world.advance()
    assert first.results["acme"].pointer.state == "CANARY_10"  # extended, not decided
    note = history(world.db, NAME, "acme")[-1].note
    assert note.startswith("CANARY_10 inconclusive (1 of 1; the step runs another 60 s)")
    assert "needs >= 12 (40 rows with actuals a day x 10% = 4.0 a day" in note
    [(outcome, rule, passed, evidence)] = rows(
        world.db, "SELECT outcome, rule, passed, evidence FROM rollout_analyses"
    )
    assert (outcome, rule, passed) == ("inconclusive", "interval", False)
    assert evidence["rows_needed"] == 12 and evidence["rows"] >= 12
    assert evidence["interval_low"] <= 0.05 < evidence["interval_high"]
    listed = deployment_lines(world.db, "acme", 5)
    assert "1 analyses (1 inconclusive)" in listed[0]
    assert listed[2].startswith("        last analysis: CANARY_10 inconclusive (interval): ")
    with transaction(world.db) as cur:  # the decision's MLflow run, as deploy_model opens it
        cur.execute("UPDATE deployment_decisions SET mlflow_run_id = 'run-1'")
    client = LoggedBatches()
    assert (
        mirror_analyses(world.db, SimpleNamespace(client=client), time.monotonic() + 30).mirrored
        == 1
    )
    [(run_id, metrics, tags)] = client.batches
    assert run_id == "run-1" and tags["CANARY_10/outcome"] == "inconclusive"
    assert metrics["CANARY_10/evidence_rows_needed"] == 12
    assert metrics["CANARY_10/evidence_interval_high"] == evidence["interval_high"]

    world.clock.forward(30)  # inside the extension: not even visited
    assert world.advance().waiting == 1
    world.clock.forward(31)
    final = world.advance()
    state = final.results["acme"].pointer.state
    change = evidence["wape_change"]  # the same rows: no new day was served
    assert state == ("CANARY_50" if change <= 0.05 else "ROLLED_BACK")
    last = rows(world.db, "SELECT outcome, rule, reason FROM rollout_analyses ORDER BY id")[-1]
    assert last[1] == "final rule: point"
    assert "still inconclusive after 1 extension(s), the point estimate" in last[2]
