"""The evaluation gate and the registry end to end: real GPU service, real MLflow, Postgres.

Each candidate goes the way the poller sends it: its RunRequest (model_candidate and
registered_model, with their checks) is executed on the Postgres-backed instance.
"""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import mlflow
import pytest

from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.features.training_export import LABEL, MODEL_FEATURES, read_holdout
from retrain_assets.models.gate_results import latest_gate_result
from retrain_assets.models.scoring import wape
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.registry.mlflow_registry import CHAMPION, MlflowRegistry, model_name
from retrain_assets.runtime.environment import child_environment, prepare_dagster_home, repo_file
from retrain_assets_tests.models.flow import (
    CUSTOMER,
    STRONG,
    execute,
    materialize,
    poll_until_requested,
    train_config,
)
from retrain_assets_tests.support.platform import graphql, running_webserver

pytestmark = pytest.mark.system
CLI = str(Path(sys.executable).parent / "retrain-assets")
WEAK = {"num_boost_round": 2, "learning_rate": 0.01}  # barely moves off the mean

CHECK_EXECUTIONS = """
query ($partition: String) {
  assetCheckExecutions(assetKey: {path: ["model_candidate"]}, checkName: "beats_champion",
                       partition: $partition, limit: 5) {
    runId status partition
    evaluation { success description }
  }
}
"""


def train(instance, **config) -> tuple[str, dg.RunRequest]:
    """Submit a training run, wait for the job, and return its run key and the poller's request."""
    submitted = materialize(instance, [training_job], train_config(**config))
    key = submitted.asset_materializations_for_node("training_job")[0].metadata["run_key"].value
    request = poll_until_requested(instance, seconds=120)
    assert request.run_key == f"candidate-{key}-1"
    return key, request


def gate(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    [evaluation] = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "beats_champion"
    ]
    return evaluation


def audit(uri: str) -> subprocess.CompletedProcess:
    """Run `retrain-assets audit` for this module's customer (MLflow is shared by the session;
    the deployment records it checks the aliases against are this test's project database)."""
    env = {
        "PATH": str(Path(sys.executable).parent),
        "MLFLOW_TRACKING_URI": uri,
        "RETRAIN_APP_PG_URL": os.environ["RETRAIN_APP_PG_URL"],
    }
    return subprocess.run(
        [CLI, "audit", "--customer", CUSTOMER], env=env, capture_output=True, text=True, timeout=300
    )


def test_a_winner_is_registered_once_as_challenger_and_retries_change_nothing(model_world):
    instance, uri = model_world.instance, model_world.mlflow_uri
    registry = MlflowRegistry(uri)
    assert registry.champion(CUSTOMER) is None  # so the reference is seasonal naive
    key, request = train(instance, **STRONG)
    result = execute(instance, request)
    assert result.success
    passed = gate(result)
    assert passed.passed, passed.description
    assert passed.partition == CUSTOMER
    assert passed.metadata["reference"].value == "seasonal naive (same weekday last week)"
    # the margin decided (the default); the evidence is shown beside it (issue 26)
    assert passed.metadata["rule"].value == "margin"
    assert passed.metadata["interval_low"].value <= passed.metadata["interval_high"].value
    assert str(passed.metadata["evidence_verdict"].value).startswith(("pass (", "fail ("))

    # the candidate's prediction intervals, judged on the same holdout (issue 26, part 4)
    coverage_80 = passed.metadata["coverage_80"].value
    assert 0.7 <= coverage_80 <= 1.0, passed.metadata["interval_coverage"].value
    widths = [passed.metadata[f"interval_halfwidth_{n}"].value for n in ("80", "95")]
    assert 0 < widths[0] < widths[1]

    [version] = registry.versions_of(CUSTOMER, key)
    assert version.aliases == ["challenger"]
    assert version.tags == {"run_key": key, "customer": CUSTOMER}
    _, carried = registry.load_version_with_metadata(CUSTOMER, version.version)
    # what the service will serve: the trainer's defaults (3 windows, widths per series)
    assert carried["prediction_intervals"]["windows"] == 3
    assert carried["prediction_intervals"]["scale"] == "linear"
    assert passed.metadata["interval_scale"].value == "linear"
    # the metadata shows the width rounded to 4 places
    assert carried["prediction_intervals"]["halfwidths"]["80"] == pytest.approx(widths[0], abs=5e-5)
    [run] = registry.runs_of(CUSTOMER, key)
    training = materialize(instance, [training_job], train_config(**STRONG))
    snapshot = training.asset_materializations_for_node("training_job")[0].metadata["snapshot"]
    assert run.data.tags["customer"] == CUSTOMER and run.data.tags["run_key"] == key
    assert run.data.tags["snapshot_id"] == snapshot.value["snapshot_sha"]
    assert run.data.metrics["gate_passed"] == 1.0
    info = mlflow.models.get_model_info(f"models:/{registry.logged_model_id(run.info.run_id)}")
    assert [c["name"] for c in info.signature.inputs.to_dict()] == MODEL_FEATURES
    assert [a.path for a in registry.client.list_artifacts(run.info.run_id, "plots")] == [
        "plots/forecast.png"
    ]
    shown = result.asset_materializations_for_node("model_candidate")[0].metadata
    assert shown["forecast_vs_actual"].value.startswith("![")
    registered = result.asset_materializations_for_node("registered_model")[0].metadata
    assert registered["version"].value == version.version

    # The same run retried and the same key requested again: one run, one version.
    assert execute(instance, request).success
    assert materialize(instance, [training_job], train_config(**STRONG)).success
    assert len(registry.runs_of(CUSTOMER, key)) == 1
    assert [v.version for v in registry.versions_of(CUSTOMER, key)] == [version.version]
    clean = audit(uri)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    # A registry seeded with a duplicate: the CLI and the asset check both name the run key.
    model_id = registry.logged_model_id(run.info.run_id)
    duplicate = registry.client.create_model_version(
        model_name(CUSTOMER),
        source=f"models:/{model_id}",
        run_id=run.info.run_id,
        tags={"run_key": key, "customer": CUSTOMER},
        model_id=model_id,
    )
    try:
        dirty = audit(uri)
        assert dirty.returncode == 1
        assert f"run key {key} has 2 registered versions" in dirty.stdout
        checked = execute(instance, request, selection=[dg.AssetKey("registered_model")])
        [check] = [
            e
            for e in checked.get_asset_check_evaluations()
            if e.check_name == "one_version_per_run_key"
        ]
        assert not check.passed and key in check.description
    finally:
        registry.client.delete_model_version(model_name(CUSTOMER), duplicate.version)


def test_a_loser_fails_the_gate_against_the_champion_rescored_now(model_world, pg_server):
    instance, db, uri = model_world.instance, model_world.db, model_world.mlflow_uri
    registry = MlflowRegistry(uri)
    champion_key, request = train(instance, **STRONG)
    assert execute(instance, request).success
    [champion] = registry.versions_of(CUSTOMER, champion_key)
    registry.client.set_registered_model_alias(model_name(CUSTOMER), CHAMPION, champion.version)
    try:
        # A stale recorded metric that would let any loser pass if the gate trusted it.
        registry.log_metrics(champion.run_id, {"gate_candidate_wape": 9.99, "wape": 9.99})
        loser_key, request = train(instance, **WEAK)
        result = execute(instance, request)
        failed = gate(result)
        assert not failed.passed
        assert failed.partition == CUSTOMER
        holdout = read_holdout(PartitionStorage().store(), CUSTOMER, loser_key)
        _, booster = registry.load_champion(CUSTOMER)
        fresh = wape(holdout[LABEL].to_numpy(float), booster.predict(holdout[MODEL_FEATURES]))
        assert failed.metadata["reference_wape"].value == pytest.approx(fresh)
        assert failed.metadata["champion_version"].value == (
            f"{model_name(CUSTOMER)} v{champion.version}"
        )
        assert failed.metadata["rows_scored"].value == len(holdout)
        assert failed.metadata["candidate_wape"].value > fresh
        # Blocked: nothing downstream ran, no version exists, the verdict is recorded.
        assert result.asset_materializations_for_node("registered_model") == []
        assert registry.versions_of(CUSTOMER, loser_key) == []
        assert latest_gate_result(db, loser_key).passed is False

        # registered_model alone (Dagster only blocks inside one run) refuses by the record.
        alone = execute(instance, request, selection=[dg.AssetKey("registered_model")])
        assert not alone.success
        error = alone.get_step_failure_events()[0].step_failure_data.error.to_string()
        assert f"refusing to register {CUSTOMER} candidate {loser_key}" in error
        assert "beats_champion failed" in error
        assert registry.versions_of(CUSTOMER, loser_key) == []

        # What the UI shows for this customer partition: the failed check of this run.
        env = child_environment(pg_server, prepare_dagster_home(repo_file("dagster.yaml")))
        with running_webserver(env, model_world.home / "webserver.log") as port:
            rows = graphql(port, CHECK_EXECUTIONS, {"partition": CUSTOMER})
        latest = rows["assetCheckExecutions"][0]
        assert (latest["runId"], latest["status"], latest["partition"]) == (
            result.run_id,
            "FAILED",
            CUSTOMER,
        )
        assert latest["evaluation"]["success"] is False
        assert "does not beat" in latest["evaluation"]["description"]
    finally:
        registry.client.delete_registered_model_alias(model_name(CUSTOMER), CHAMPION)


def test_a_corrupted_artifact_fails_the_candidate_and_registers_nothing(model_world):
    instance, service = model_world.instance, model_world.service
    registry = MlflowRegistry(model_world.mlflow_uri)
    key, request = train(instance)
    job_id = service.client().find(key).id
    model = service.data_dir / "jobs" / job_id / "model.txt"
    model.write_bytes(model.read_bytes() + b"\ncorrupted in transit")
    result = execute(instance, request)
    assert not result.success
    error = result.get_step_failure_events()[0].step_failure_data.error.to_string()
    assert "sha256" in error
    assert result.get_asset_check_evaluations() == []
    assert registry.runs_of(CUSTOMER, key) == []
    assert registry.versions_of(CUSTOMER, key) == []


def test_before_a_first_champion_the_challenger_is_the_reference_and_never_regresses(
    model_world, monkeypatch
):
    instance, db, uri = model_world.instance, model_world.db, model_world.mlflow_uri
    registry = MlflowRegistry(uri)
    first_key, first_request = train(instance, **STRONG)
    assert execute(instance, first_request).success
    [first] = registry.versions_of(CUSTOMER, first_key)
    assert first.aliases == ["challenger"]
    assert latest_gate_result(db, first_key).reference_version is None  # seasonal naive

    # A failed re-gate of the challenger's own run key takes the alias away, and says why.
    monkeypatch.setenv("RETRAIN_GATE_MARGIN", "0.9")
    regated = execute(instance, first_request)
    assert not gate(regated).passed
    assert regated.asset_materializations_for_node("registered_model") == []
    recorded = latest_gate_result(db, first_key)
    assert recorded.reference == "seasonal naive (same weekday last week)"  # never itself
    assert recorded.reason.endswith(f"; alias challenger removed from version {first.version}")
    assert gate(regated).description == recorded.reason
    [withdrawn] = registry.versions_of(CUSTOMER, first_key)
    assert withdrawn.aliases == []
    assert withdrawn.tags["alias_withdrawn"].startswith("challenger: candidate WAPE")
    monkeypatch.setenv("RETRAIN_GATE_MARGIN", "0.02")
    assert execute(instance, first_request).success  # passes again: challenger again
    assert registry.versions_of(CUSTOMER, first_key)[0].aliases == ["challenger"]

    # A candidate as good as the challenger (same model, another seed: another run key) beats
    # seasonal naive, so before it would have been registered and taken the alias.
    second_key, second_request = train(instance, **STRONG, seed=8)
    assert second_key != first_key
    result = execute(instance, second_request)
    verdict = gate(result)
    assert not verdict.passed
    assert verdict.metadata["reference"].value == (
        f"challenger {model_name(CUSTOMER)} v{first.version}"
    )
    holdout = read_holdout(PartitionStorage().store(), CUSTOMER, second_key)
    naive = wape(holdout[LABEL].to_numpy(float), holdout["lag_7"].fillna(0.0).to_numpy(float))
    assert verdict.metadata["candidate_wape"].value < naive * 0.98  # beats seasonal naive
    assert registry.versions_of(CUSTOMER, second_key) == []
    assert registry.aliased_version(CUSTOMER, "challenger").version == first.version
    assert latest_gate_result(db, second_key).reference_version == first.version
