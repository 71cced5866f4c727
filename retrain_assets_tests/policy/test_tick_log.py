"""The policy's tick log at scale: decisions, deferrals and errors named, waiting ones counted.

At 100,000 customers a line per customer's reason was about 11 MB a tick; the log now holds
what happened and one line of counts, so its size does not grow with the customers who wait.
"""

from __future__ import annotations

import itertools

import pytest
from psycopg2.extras import Json, execute_values

import retrain_assets.automation.retraining_policy as policy_module
from retrain_assets.customers import CUSTOMERS
from retrain_assets.machines.runs import start_run
from retrain_assets.machines.training import training_machine
from retrain_assets.policy.decisions import list_decisions, record_decision
from retrain_assets.policy.thresholds import set_settings
from retrain_assets.store.database import transaction
from retrain_assets.store.snapshot_ref import SnapshotRef
from retrain_assets_tests.policy.days import day
from retrain_assets_tests.policy.tick_log import logged_tick

DEFERRED = 3  # the last customers in turn, which the tick's budget does not reach
LOG_BYTES = 6_000  # the whole tick log, at any number of waiting customers


def waiting(n: int) -> list[str]:
    return [f"w{i:05d}" for i in range(n)]


def trained(db: str, names: list[str], last: int) -> None:
    """Record for each customer a decision on days 0..last, taken up by a run (in bulk)."""
    ref = SnapshotRef(day(0), day(last), {day(d).isoformat(): f"v1-{d}" for d in range(last + 1)})
    with transaction(db) as cur:
        execute_values(
            cur,
            "INSERT INTO retraining_decisions (customer, policy, reason, first_day, last_day,"
            " data_versions, snapshot_sha, decided_by, dagster_run_id) VALUES %s",
            [
                (name, "manual", "t", ref.first_day, ref.last_day, Json(ref.data_versions),
                 ref.sha_for(name), "test", f"run-{name}")
                for name in names
            ],
        )  # fmt: skip


@pytest.mark.parametrize("n_waiting", [200, 2_000])
def test_the_tick_log_names_what_happened_and_counts_the_rest(
    db, publish, dagster_instance, tmp_path, monkeypatch, n_waiting
):
    """acme decides, bolt is busy, a-err fails, a-new lacks history, the last 3 are deferred."""
    names = waiting(n_waiting)
    everyone = ["a-err", "a-new", "acme", "bolt", *names]
    dagster_instance.add_dynamic_partitions(CUSTOMERS.name, everyone)
    publish(0, 29, {name: 10 for name in ["a-err", "acme", "bolt", *names]})
    trained(db, names, 29)  # nothing new since: nothing due
    set_settings(db, "acme", {"min_history_days": 20}, "test")  # a first training
    start_run(db, training_machine(), "bolt", "key-1", {"spec": {}})
    # a-err: 7 days after its window, so drift is measured, and no feature file to read
    window = SnapshotRef(day(0), day(22), {day(d).isoformat(): f"v1-{d}" for d in range(23)})
    record_decision(db, "a-err", "manual", "t", window, "t", dagster_run_id="r0")
    calls = itertools.count()  # the budget runs out before the last DEFERRED customers
    reached = len(everyone) - DEFERRED
    monkeypatch.setattr(policy_module, "clock", lambda: 0.0 if next(calls) <= reached else 99.0)

    result, lines = logged_tick(dagster_instance, db, tmp_path / "storage")

    [decision] = [d for d in list_decisions(db) if d.customer == "acme"]
    assert [r.run_key for r in result.run_requests] == [f"decision-{decision.id}"]
    text = "\n".join(lines)
    # 5 lines whatever n_waiting: the error, the decision, the deferred, the counts, and the
    # skip reason (with a request it goes to the log); a line per 100 customers was 25 lines
    # and 260 KB at 2,000 waiting
    assert len(lines) == 5 and len(text.encode()) < LOG_BYTES
    assert f"acme: decision {decision.id} (schedule): first training" in text
    assert "a-err: the policy could not evaluate: MissingPartitionError" in text
    deferred = ", ".join(names[-DEFERRED:])
    assert f"deferred to the next tick (tick budget used), 1-3 of 3: {deferred}" in text
    total = f"{len(everyone):,} customer(s): {n_waiting - DEFERRED:,} nothing due; 3 deferred; "
    assert total + "1 busy; 1 decided (first training); 1 error; 1 not enough history" in text
    shown = 20 - 4  # the skip reason: the first 20 customers in turn, then how many more
    assert names[shown - 1] in text and names[shown] not in text
    assert f"; ... and {len(everyone) - 20} more (counted in the tick log;" in text
