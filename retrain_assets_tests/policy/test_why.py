"""`retrain-assets policy why NAME`: the reason the tick gives, for one customer, recording nothing.

Through the command line as an operator runs it: the platform's project database and Dagster
instance (the test's own, found by RETRAIN_PG_URL and RETRAIN_DB_PREFIX as `up` sets them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import dagster as dg
import pytest

from retrain_assets.cli import main
from retrain_assets.customers import CUSTOMERS
from retrain_assets.machines.runs import start_run
from retrain_assets.machines.training import training_machine
from retrain_assets.policy.alerts import pending_alerts, raise_alert
from retrain_assets.policy.decisions import list_decisions, record_decision
from retrain_assets.policy.drift import DriftMeasure
from retrain_assets.policy.history import choose_window
from retrain_assets.policy.thresholds import set_settings
from retrain_assets.store.customers import register_customer
from retrain_assets.store.database import transaction
from retrain_assets.store.server import PostgresServer
from retrain_assets.store.snapshot_ref import SnapshotRef
from retrain_assets.store.snapshots import latest_snapshots
from retrain_assets_tests.policy.days import day
from retrain_assets_tests.policy.tick_log import logged_tick

# acme: never decided, 25 of 56 days; bolt: its training machine is busy; cato: trained, the
# schedule not due; dune: trained, a drift alert pending; eddy: a decision waiting for its
# run; fern: enough history for a first training (min_history_days 20)
CUSTOMERS_HERE = ["acme", "bolt", "cato", "dune", "eddy", "fern"]


@pytest.fixture
def cli_env(tmp_path, pg_server: PostgresServer, monkeypatch) -> Iterator[None]:
    """The command line's environment on this test's databases; os.environ restored after."""
    saved = dict(os.environ)  # attach_platform exports the platform's variables, as `up` does
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RETRAIN_PG_URL", pg_server.url)
    monkeypatch.setenv("RETRAIN_STORAGE_URL", str(tmp_path / "storage"))
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def situations(db, publish, dagster_instance) -> dict[str, int]:
    """Every customer in its situation; return the ids of the decisions and the alert made."""
    for name in CUSTOMERS_HERE[2:]:
        register_customer(db, name, "US", "test")
    dagster_instance.add_dynamic_partitions(CUSTOMERS.name, CUSTOMERS_HERE)
    publish(0, 24, {name: 10 for name in CUSTOMERS_HERE})
    ref = choose_window(latest_snapshots(db), 90)
    start_run(db, training_machine(), "bolt", "key-1", {"spec": {}})
    cato = record_decision(db, "cato", "manual", "t", ref, "t", dagster_run_id="r-cato")
    dune = record_decision(db, "dune", "manual", "t", ref, "t", dagster_run_id="r-dune")
    alert = raise_alert(db, "dune", dune.id, DriftMeasure(1.5, "price", day(20), day(24)), 0.5)
    eddy = record_decision(db, "eddy", "manual", "by hand", ref, "ana")  # no run yet
    set_settings(db, "fern", {"min_history_days": 20}, "test")
    return {"cato": cato.id, "alert": alert.id, "eddy": eddy.id}


def why(name: str, capsys) -> tuple[int, list[str]]:
    """Run `retrain-assets policy why NAME`; return the exit code and the lines printed."""
    code = main(["policy", "why", name])
    captured = capsys.readouterr()
    return code, (captured.out or captured.err).splitlines()


def test_why_gives_the_reason_the_tick_gives_and_records_nothing(
    db, dagster_instance, situations, cli_env, tmp_path, capsys
):
    answers = {name: why(name, capsys) for name in CUSTOMERS_HERE}
    assert all(code == 0 for code, _ in answers.values())
    assert [d.customer for d in list_decisions(db)] == ["eddy", "dune", "cato"]  # none new
    assert [a.id for a in pending_alerts(db).values()] == [situations["alert"]]
    with transaction(db) as cur:
        cur.execute("SELECT count(*) FROM drift_baselines")
        assert cur.fetchone() == (0,)

    verdicts = {name: lines[0] for name, (_, lines) in answers.items()}
    assert verdicts == {
        "acme": "acme: no decision now (not enough history)",
        "bolt": "bolt: no decision now (busy)",
        "cato": "cato: no decision now (nothing due)",
        "dune": "dune: no decision now (waiting for drift approval)",
        "eddy": "eddy: no decision now (busy)",
        "fern": "fern: would decide now, policy schedule (first training); the next "
        "retraining_policy tick records the decision and requests training_job",
    }
    reasons = {name: lines[1] for name, (_, lines) in answers.items()}
    assert reasons["acme"] == (
        "acme: not enough history yet: 25 of 56 days published with rows for this customer"
    )
    assert reasons["bolt"] == (
        "bolt: busy (training machine in INITIAL): no new decision until it finishes"
    )
    assert reasons["eddy"] == (
        f"eddy: busy (decision {situations['eddy']} waiting for its run): no new decision "
        "until it finishes"
    )
    assert reasons["cato"].startswith(
        f"cato: nothing due: last decision {situations['cato']} is 0 day(s) old (schedule 7: due 20"
    )
    assert "UTC, with a day after 2026-01-25 published), 0 of 1000 new rows" in reasons["cato"]
    assert f"alert {situations['alert']} waiting for approval since" in reasons["dune"]
    assert answers["dune"][1][2].startswith(
        f"drift alert {situations['alert']} waits for approval: in the Dagster UI open the "
        "launchpad of approve_drift_retraining (/locations/retrain_assets/jobs/"
        "approve_drift_retraining/playground), choose partition dune"
    )
    assert (
        reasons["fern"]
        == "fern: first training: no decision recorded yet, 25 days of history published"
    )

    result, log = logged_tick(dagster_instance, db, tmp_path / "storage")
    [fern] = [d for d in list_decisions(db) if d.customer == "fern"]
    assert {r.partition_key for r in result.run_requests} == {"eddy", "fern"}
    [told] = [line for line in log if "training request(s); otherwise: " in line]
    for name in ("acme", "bolt", "cato", "dune", "eddy"):
        assert reasons[name] in told  # the tick's reason, word for word
    assert f"fern: decision {fern.id}: {reasons['fern'].removeprefix('fern: ')}" in told
    code, lines = why("fern", capsys)  # decided: busy until its run takes it up
    assert code == 0 and lines[1] == (
        f"fern: busy (decision {fern.id} waiting for its run): no new decision until it finishes"
    )


def test_an_unknown_or_unsafe_customer_exits_2_with_the_reason(
    db, dagster_instance, situations, cli_env, capsys
):
    code, lines = why("nobody", capsys)
    assert code == 2
    assert lines[0].startswith("retrain-assets policy: unknown customer 'nobody': no `customers`")
    code, lines = why("../x", capsys)
    assert code == 2 and "customers partition '../x' skipped" in lines[0]


def test_while_feature_days_are_published_why_says_nobody_gets_a_decision(
    db, dagster_instance, situations, cli_env, capsys
):
    dagster_instance.add_run(
        dg.DagsterRun(
            job_name="__ASSET_JOB",
            run_id="features-run",
            status=dg.DagsterRunStatus.STARTED,
            asset_selection=frozenset({dg.AssetKey("store_day_features")}),
        )
    )
    code, lines = why("fern", capsys)
    assert code == 0 and lines == [
        "fern: no decision now (for any customer)",
        "no decision while feature days are being published (decisions wait for settled "
        "data): run features-run (store_day_features, STARTED)",
    ]


def test_a_customer_the_policy_cannot_evaluate_exits_1_with_the_ticks_error(
    db, dagster_instance, situations, cli_env, capsys
):
    """acme trained on days 0..17: 7 new days, so drift is measured, and no feature file."""
    window = SnapshotRef(day(0), day(17), {day(d).isoformat(): f"v1-{d}" for d in range(18)})
    record_decision(db, "acme", "manual", "t", window, "t", dagster_run_id="r-acme")
    code, lines = why("acme", capsys)
    assert code == 1
    assert lines[0].startswith("acme: the policy could not evaluate it: MissingPartitionError(")
    assert lines[1].startswith("acme: error: store_day_features 2026-01-01 is published but")
