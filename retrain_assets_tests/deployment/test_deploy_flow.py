"""Deploying from a Dagster run: the deploy-time check, the decision, the rollout, the audit.

Real Postgres (project tables and the Dagster instance), a real MLflow server with LightGBM
versions trained here, the `deploy_model` job executed as the daemon would launch it. The
prediction log is written as docs/deployment.md says the service writes it.
"""

from __future__ import annotations

import dagster as dg
import mlflow
import pytest

from retrain_assets.cli import main
from retrain_assets.deployment.advancing import advance_rollouts
from retrain_assets.deployment.mirror import mirror_analyses
from retrain_assets.deployment.routes import read_routes
from retrain_assets.deployment.tracking import deployment_experiment
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.models.challenger_now_check import CHECK_NAME
from retrain_assets.registry.mlflow_registry import CHAMPION, model_name
from retrain_assets.settings import storage_root
from retrain_assets.store.database import transaction
from retrain_assets_tests.deployment.contract import serve_rows

# A real `mlflow server` process (the session's), as the registry and model tests use.
pytestmark = pytest.mark.system

DEPLOY = "deploy_model"


def rows(db: str, sql: str, args: tuple = ()) -> list[tuple]:
    with transaction(db) as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def check_of(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    [found] = [e for e in result.get_asset_check_evaluations() if e.check_name == CHECK_NAME]
    return found


def served_by(world, versions: list[str], first: int = 30, last: int = 59):
    """Forecasters of registered versions for the customer's days `first`..`last`."""
    frame = world.frame(first, last)
    keys = list(zip(frame["store_id"], frame["item_id"], frame["date"].dt.date, strict=True))
    registry = world.registry()
    models = {}
    for version in versions:
        predictions = registry.load_version(world.customer, version).predict(frame[MODEL_FEATURES])
        table = dict(zip(keys, predictions, strict=True))
        models[version] = lambda s, i, d, table=table: float(table[(s, i, d)])
    return keys, models


def advance(world):
    return advance_rollouts(
        world.db,
        world.registry(),
        ParquetPartitionStore(storage_root()),
        customers=[world.customer],
    )


def test_first_deployment_then_a_better_challenger_rolls_out_and_is_promoted(registry_world):
    world = registry_world
    registry, name = world.registry(), model_name(world.customer)
    first = world.register("rk-first", rounds=10, train_days=(28, 45))
    result = world.run(DEPLOY)
    assert result.success, result.get_step_failure_events()
    check = check_of(result)
    assert check.passed and check.partition == world.customer
    assert check.metadata["champion_version"].value == "none (seasonal naive)"
    [deployed] = result.asset_materializations_for_node("deployment_decision")
    assert deployed.metadata["rollout_state"].value == "DONE"  # nothing to canary against
    assert registry.aliases(world.customer)[CHAMPION] == first
    # the deployment's MLflow run left no process-wide MLflow state behind (URI, experiment)
    assert mlflow.tracking._tracking_service.utils._tracking_uri is None
    assert mlflow.tracking.fluent._active_experiment_id is None

    second = world.register("rk-second", rounds=120)
    result = world.run(DEPLOY)
    assert result.success, result.get_step_failure_events()
    check = check_of(result)
    assert check.passed, check.description
    assert check.metadata["champion_version"].value == first
    assert check.metadata["scored_days"].value == "2025-02-23 .. 2025-03-01"
    [deployed] = result.asset_materializations_for_node("deployment_decision")
    shown = {k: v.value for k, v in deployed.metadata.items()}
    assert shown["rollout_state"] == "CANARY_10" and shown["replaces_champion"] == first
    assert shown["version"] == second and shown["run_key"] == "rk-second"
    assert shown["decided_by"] == "a person via the Dagster UI"
    assert f"passed: {check.description}" in shown[f"gate_{CHECK_NAME}"]
    route = read_routes(world.db, [world.customer])[world.customer]
    assert (route.champion_version, route.canary_version, route.canary_weight) == (
        first,
        second,
        0.10,
    )
    assert registry.aliases(world.customer) == {
        "champion": first,
        "canary": second,
        "challenger": second,
    }

    # The MLflow run of this decision: one per deployment run, in deployments/<customer>.
    experiment = registry.client.get_experiment_by_name(deployment_experiment(world.customer))
    runs = registry.client.search_runs([experiment.experiment_id])
    assert len(runs) == 2
    mine = next(r for r in runs if r.info.run_id == shown["mlflow_run_id"])
    assert mine.data.tags["deployment_decision"] == str(shown["deployment_decision_id"])
    assert mine.data.tags["dagster_run_id"] == result.run_id
    assert mine.data.metrics["check_passed"] == 1.0

    keys, models = served_by(world, [first, second])
    for _ in range(2):  # CANARY_10, then CANARY_50
        serve_rows(world.db, world.customer, keys, models)
        advance(world)
    assert registry.aliases(world.customer) == {
        "champion": second,
        "previous": first,
        "challenger": second,
    }
    route = read_routes(world.db, [world.customer])[world.customer]
    assert (route.champion_version, route.canary_version, route.canary_weight) == (
        second,
        None,
        0.0,
    )
    assert [r[0] for r in rows(world.db, "SELECT passed FROM rollout_analyses")] == [True, True]
    assert registry.client.get_model_version(name, second).tags["deployment_decision"] == str(
        shown["deployment_decision_id"]
    )
    assert mirror_analyses(world.db, registry, deadline=float("inf")).mirrored == 2
    logged = registry.client.get_run(shown["mlflow_run_id"]).data
    assert logged.metrics["CANARY_50/passed"] == 1.0 and "CANARY_10/verdict" in logged.tags

    assert main(["audit", "--tracking-uri", world.mlflow_uri, "--customer", world.customer]) == 0
    registry.client.set_registered_model_alias(name, CHAMPION, first)  # a move by hand
    try:
        assert main(["audit", "--tracking-uri", world.mlflow_uri]) == 1
        audited = world.run(checks=["deployments_match_decisions"])  # the check says the same
        [evaluation] = [
            e
            for e in audited.get_asset_check_evaluations()
            if e.check_name == "deployments_match_decisions"
        ]
        assert not evaluation.passed
        assert "a champion move without a decision" in evaluation.description
    finally:
        registry.client.set_registered_model_alias(name, CHAMPION, second)


def test_a_failing_deploy_time_check_blocks_the_deployment_and_a_later_run_alone(registry_world):
    world = registry_world
    registry = world.registry()
    first = world.register("rk-first", rounds=60)
    assert world.run(DEPLOY).success
    worse = world.register("rk-inflated", rounds=60, label_factor=1.8)  # forecasts 80 % high
    result = world.run(DEPLOY)
    assert not result.success
    check = check_of(result)
    assert not check.passed and "does not beat" in check.description
    assert result.asset_materializations_for_node("deployment_decision") == []
    assert rows(world.db, "SELECT version FROM deployment_decisions") == [(first,)]
    assert registry.aliases(world.customer) == {"champion": first, "challenger": worse}
    [(passed, gate)] = rows(
        world.db,
        "SELECT passed, gate FROM gate_results WHERE model_version = %s",
        (worse,),
    )
    assert (passed, gate) == (False, CHECK_NAME)

    alone = world.run(assets=["deployment_decision"])
    assert not alone.success
    error = alone.get_step_failure_events()[0].step_failure_data.error.to_string()
    assert f"refusing to deploy {model_name(world.customer)} v{worse}" in error
    assert f"{CHECK_NAME} failed: " in error
    assert rows(world.db, "SELECT count(*) FROM deployment_decisions") == [(1,)]


def test_a_rollout_aborted_by_hand_is_rolled_back_with_who_and_why(registry_world, capsys):
    world = registry_world
    registry = world.registry()
    first = world.register("rk-first", rounds=10, train_days=(28, 45))
    assert world.run(DEPLOY).success
    second = world.register("rk-second", rounds=120)
    assert world.run(DEPLOY).success
    assert registry.aliases(world.customer)["canary"] == second
    code = main(["rollback", world.customer, "--reason", "looks odd", "--by", "dana"])
    assert code == 0
    out = capsys.readouterr().out
    assert f"{world.customer}: rollout" in out and "rolled back: aborted by dana" in out
    assert registry.aliases(world.customer) == {"champion": first, "challenger": second}
    [(outcome, reason)] = rows(
        world.db, "SELECT outcome, reason FROM rollouts WHERE version = %s", (second,)
    )
    assert outcome == "rolled_back"
    assert reason == "aborted by dana in CANARY_10: looks odd"
    assert main(["rollback", world.customer, "--reason", "again"]) == 2
    assert "has no rollout in progress" in capsys.readouterr().err
    # A redeploy of the same version is a new decision (its pass is recent, champion the same)
    again = world.run(assets=["deployment_decision"])
    assert again.success
    decisions = rows(world.db, "SELECT version FROM deployment_decisions ORDER BY id")
    assert decisions == [(first,), (second,), (second,)]
    assert main(["audit", "--tracking-uri", world.mlflow_uri, "--customer", world.customer]) == 0
