import os

import mlflow
import pytest

from retrain_assets.prediction_intervals import METADATA_KEY, IntervalTable
from retrain_assets.registry import MlflowRegistry, MlflowRegistryResource, audit_registry
from retrain_assets.registry.mlflow_registry import experiment_name, model_name
from retrain_assets_tests.registry.logged_runs import METRICS, PNG, customer, logged_run, run_key


@pytest.mark.system
def test_one_run_and_one_model_per_run_key_under_retries(
    mlflow_uri, model_file, example_frame, monkeypatch
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)  # as `up` sets it for its children
    registry, name, key = MlflowRegistry(mlflow_uri), customer(), run_key()
    tags = {"snapshot_id": "snap-1", "decision_id": "dec-9"}
    run_ids = {registry.candidate_run(name, key, tags) for _ in range(3)}
    assert len(run_ids) == 1
    (run_id,) = run_ids
    assert [run.info.run_id for run in registry.runs_of(name, key)] == [run_id]
    run = registry.client.get_run(run_id)
    assert run.data.tags["customer"] == name and run.data.tags["run_key"] == key
    assert run.data.tags["snapshot_id"] == "snap-1" and run.data.tags["decision_id"] == "dec-9"
    experiment = registry.client.get_experiment(run.info.experiment_id)
    assert experiment.name == experiment_name(name)

    first = registry.log_candidate(run_id, model_file, METRICS, example_frame.head(5), PNG)
    again = registry.log_candidate(run_id, model_file, METRICS, example_frame.head(5), PNG)
    assert first == again
    assert os.environ["MLFLOW_TRACKING_URI"] == mlflow_uri  # log_model's detour left it alone
    models = registry.client.search_logged_models([run.info.experiment_id])
    assert [model.model_id for model in models] == [first]
    assert registry.client.get_run(run_id).data.metrics == METRICS
    history = registry.client.get_metric_history(run_id, "holdout_mape")
    assert len(history) == 1  # the retry logged nothing
    plots = registry.client.list_artifacts(run_id, "plots")
    assert [artifact.path for artifact in plots] == ["plots/forecast.png"]

    signature = mlflow.models.get_model_info(f"models:/{first}").signature
    assert signature.inputs.input_names() == ["lag_7", "lag_28", "is_holiday"]


@pytest.mark.system
def test_register_creates_one_version_per_run_key_with_alias_challenger(
    mlflow_uri, model_file, example_frame
):
    registry, name, key = MlflowRegistry(mlflow_uri), customer(), run_key()
    run_id = logged_run(registry, name, key, model_file, example_frame)
    version = registry.register(name, key, run_id)
    assert registry.register(name, key, run_id) == version == "1"
    (found,) = registry.versions_of(name, key)
    assert found.tags["run_key"] == key and found.run_id == run_id
    assert found.aliases == ["challenger"]

    later_key = run_key()
    later_run = logged_run(registry, name, later_key, model_file, example_frame)
    assert registry.register(name, later_key, later_run) == "2"
    challenger = registry.client.get_model_version_by_alias(model_name(name), "challenger")
    assert challenger.version == "2"
    assert registry.register(name, key, run_id) == "1"  # an old key does not take it back
    assert registry.client.get_model_version_by_alias(model_name(name), "challenger").version == "2"


@pytest.mark.system
def test_register_refuses_a_run_without_a_logged_model(mlflow_uri):
    registry, name, key = MlflowRegistry(mlflow_uri), customer(), run_key()
    run_id = registry.candidate_run(name, key)
    with pytest.raises(ValueError, match="log_candidate before register"):
        registry.register(name, key, run_id)


@pytest.mark.system
def test_audit_names_run_keys_with_two_runs_or_two_versions(mlflow_uri, model_file, example_frame):
    registry, name, key = MlflowRegistry(mlflow_uri), customer(), run_key()
    run_id = logged_run(registry, name, key, model_file, example_frame)
    registry.register(name, key, run_id)
    clean_key = run_key()
    registry.register(
        name, clean_key, logged_run(registry, name, clean_key, model_file, example_frame)
    )
    assert [p for p in audit_registry(registry) if p.run_key in (key, clean_key)] == []

    # a second run and a second version for the same run key, made behind the registry's back
    experiment = registry.experiment_id(name)
    stray = registry.client.create_run(experiment, tags={"run_key": key, "customer": name})
    model_id = registry.logged_model_id(run_id)
    registry.client.create_model_version(
        model_name(name),
        source=f"models:/{model_id}",
        run_id=run_id,
        tags={"run_key": key},
        model_id=model_id,
    )

    problems = [p for p in audit_registry(registry) if p.run_key in (key, clean_key)]
    assert {(p.run_key, p.duplicated) for p in problems} == {(key, "runs"), (key, "versions")}
    runs = next(p for p in problems if p.duplicated == "runs")
    assert set(runs.ids) == {run_id, stray.info.run_id}
    assert runs.where == experiment_name(name)
    assert f"run key {key} has 2 MLflow runs in experiment demand_forecast/{name}" in runs.message
    versions = next(p for p in problems if p.duplicated == "versions")
    assert versions.ids == ("1", "3") and versions.where == model_name(name)
    assert f"run key {key} has 2 registered versions" in versions.message
    # the registry itself still answers with the first of each
    assert registry.candidate_run(name, key) == registry.runs_of(name, key)[0].info.run_id
    assert registry.register(name, key, run_id) == "1"


@pytest.mark.system
def test_champion_is_the_version_with_the_alias(
    mlflow_uri, model_file, example_frame, tmp_path, monkeypatch
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)  # models:/ URIs resolve through it
    registry, name, key = MlflowRegistry(mlflow_uri), customer(), run_key()
    assert registry.champion(name) is None  # no registered model at all
    version = registry.register(
        name, key, logged_run(registry, name, key, model_file, example_frame)
    )
    assert registry.champion(name) is None  # a challenger only
    registry.client.set_registered_model_alias(model_name(name), "champion", version)
    assert registry.champion(name) == (version, f"models:/{model_name(name)}/{version}")

    _, uri = registry.champion(name)
    local = mlflow.artifacts.download_artifacts(
        artifact_uri=uri, dst_path=str(tmp_path), tracking_uri=mlflow_uri
    )
    assert {"MLmodel"} <= {path.name for path in tmp_path.rglob("*")}, local


def test_resource_reads_the_tracking_uri_when_called(monkeypatch):
    resource = MlflowRegistryResource()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example.com:5000")
    assert resource.registry().tracking_uri == "http://mlflow.example.com:5000"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.setenv("RETRAIN_MLFLOW_PORT", "15001")
    assert resource.registry().tracking_uri == "http://127.0.0.1:15001"
    configured = MlflowRegistryResource(tracking_uri="http://elsewhere:5000")
    assert configured.registry().tracking_uri == "http://elsewhere:5000"


@pytest.mark.system
def test_the_gate_rewrites_the_logged_models_intervals_and_the_registered_version_serves_them(
    mlflow_uri, model_file, example_frame
):
    registry, name, key = MlflowRegistry(mlflow_uri), customer(), run_key()
    run_id = registry.candidate_run(name, key)
    with pytest.raises(ValueError, match="has no logged model"):
        registry.set_model_metadata(run_id, METADATA_KEY, {})
    trainer = IntervalTable({"80": 2.7, "95": 7.8}, windows=2, scores=300)
    registry.log_candidate(
        run_id,
        model_file,
        METRICS,
        example_frame.head(5),
        model_metadata={METADATA_KEY: trainer.as_metadata(), "other": "kept"},
    )
    widened = IntervalTable({"80": 4.1, "95": 7.8}, 2, 300, "widened on the gate's holdout: x")
    assert registry.set_model_metadata(run_id, METADATA_KEY, widened.as_metadata())
    assert not registry.set_model_metadata(run_id, METADATA_KEY, widened.as_metadata())
    version = registry.register(name, key, run_id)
    booster, metadata = registry.load_version_with_metadata(name, version)
    assert IntervalTable.from_metadata(metadata) == widened
    assert metadata["other"] == "kept"
    assert booster.num_trees() > 0  # the model itself was left alone
