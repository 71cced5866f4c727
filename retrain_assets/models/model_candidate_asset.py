"""`model_candidate`: download the finished job's model, verify it, store it under the run key.

Requested by `gpu_job_poller` when the remote job succeeded (`candidate-<run key>-<attempt>`);
this run is the one place the training machine leaves AWAIT_CANDIDATE for the download, and it
leaves the machine in AWAIT_GATE for the gate and the registration that follow in the same run.
A re-run for the same key finds the stored candidate and changes nothing; a failed download is
retried by downloading again, never by training again. The candidate is also recorded in MLflow:
one run per run key (tagged with the customer, run key, snapshot and decision), the model with
its input signature, its training metrics and a forecast-against-actuals plot on the holdout,
and the prediction intervals the trainer computed in its MLmodel metadata (the service reads
them from there).
"""

import time

import dagster as dg
from pydantic import Field

from retrain_assets.asset_keys import MODEL_CANDIDATE, TRAINING_JOB
from retrain_assets.customers import CUSTOMERS, customer_of
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.features.training_export import MODEL_FEATURES, read_holdout
from retrain_assets.machines.backoff import retry_due
from retrain_assets.machines.engine import AdvanceResult, advance
from retrain_assets.machines.handoff import AWAIT_GATE
from retrain_assets.machines.store import pointer as read_pointer
from retrain_assets.machines.table import DONE
from retrain_assets.machines.training import (
    DOWNLOAD_SAVE,
    EVIDENCE,
    NAME,
    SPEC,
    TrainingServices,
    start_training,
    training_machine,
)
from retrain_assets.models.candidates import Candidate, CandidateTable
from retrain_assets.models.forecast_plot import forecast_plot_png, markdown_image
from retrain_assets.models.gate import booster_predictor
from retrain_assets.models.handoff_errors import doing, snapshot_window
from retrain_assets.models.lineage import metadata_for_run_key
from retrain_assets.models.resources import GpuServiceResource, training_services
from retrain_assets.models.scoring import seasonal_naive
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.prediction_intervals import METADATA_KEY, IntervalTable
from retrain_assets.registry.resource import MlflowRegistryResource
from retrain_assets.store.resource import ProjectDatabase

LOCK_TRIES = 10  # the sensor holds a pointer's lock for a moment per tick; wait it out
FETCHED = (AWAIT_GATE, DONE)  # the candidate is saved: the gate and registration may run


class CandidateConfig(dg.Config):
    """Which run's candidate to fetch (default: the customer's current training run)."""

    run_key: str | None = Field(None, description="Run key; the poller always sets it")


@dg.asset(
    key=MODEL_CANDIDATE,
    group_name="models",
    partitions_def=CUSTOMERS,
    deps=[training_job],
    kinds={"lightgbm"},
    description="The trained model of one run key, downloaded and sha256-verified.",
)
def model_candidate(
    context: dg.AssetExecutionContext,
    config: CandidateConfig,
    project_db: ProjectDatabase,
    partition_storage: PartitionStorage,
    gpu_service: GpuServiceResource,
    mlflow_registry: MlflowRegistryResource,
) -> dg.MaterializeResult:
    """Download through the training machine (-> AWAIT_GATE) and describe the candidate."""
    customer, db_url = customer_of(context), project_db.connection_url()
    current = read_pointer(db_url, NAME, customer)
    if current is None:
        raise ValueError(f"{customer} has no training run; materialize training_job first")
    key = config.run_key or current.run_key
    if current.run_key != key:
        raise ValueError(f"{customer}'s training machine runs {current.run_key}, not {key}")
    if current.state == training_machine().failed:
        spec, judged = current.payload.get(SPEC, {}), current.payload.get(EVIDENCE)
        start_training(db_url, customer, key, spec, retry=True, evidence=judged)
    services = training_services(
        db_url, gpu_service.client(), partition_storage.root(), fetching=True
    )
    result = _advance_when_free(db_url, customer, services)
    if result.pointer is None:
        raise RuntimeError(f"{customer}'s training machine is being advanced elsewhere; retry")
    window = snapshot_window(context.instance, customer, key)
    due = retry_due(result.pointer.payload, DOWNLOAD_SAVE)
    if result.pointer.state == DOWNLOAD_SAVE and due is not None:
        raise RuntimeError(
            f"downloading the model of run key {key} for {customer} (snapshot {window}) failed: "
            f"{result.pointer.last_error}; gpu_job_poller tries again at {due:%Y-%m-%d %H:%M:%S} "
            "UTC, then requests the gate"
        )
    if result.pointer.state not in FETCHED:
        raise RuntimeError(
            f"run {key} for {customer} is in {result.pointer.state}, not {AWAIT_GATE}: "
            f"{result.pointer.reason or result.pointer.last_error or 'the job has not finished'}"
        )
    candidate = CandidateTable(db_url, partition_storage.root()).get(key)
    if candidate is None:
        raise RuntimeError(f"run {key} reached {result.pointer.state} but no candidate row exists")
    with doing(
        "recording the candidate in MLflow (forecast plot on the holdout)", customer, key, window
    ):
        recorded = _record_in_mlflow(context, mlflow_registry, partition_storage, candidate)
    return dg.MaterializeResult(
        metadata={
            "run_key": key,
            "job_id": candidate.job_id,
            "sha256": candidate.sha256,
            "path": dg.MetadataValue.path(candidate.path),
            **{f"train_{name}": float(value) for name, value in candidate.metrics.items()},
            **recorded,
        },
        data_version=dg.DataVersion(key),
        tags={"retrain/run_key": key},
    )


def _advance_when_free(db_url: str, customer: str, services: TrainingServices) -> AdvanceResult:
    """Advance the machine, waiting a little while a sensor tick holds its row lock."""
    machine = training_machine()
    for _ in range(LOCK_TRIES - 1):
        result = advance(db_url, machine, customer, services)
        if not result.busy:
            return result
        time.sleep(1.0)
    return advance(db_url, machine, customer, services)


def _record_in_mlflow(
    context: dg.AssetExecutionContext,
    resource: MlflowRegistryResource,
    storage: PartitionStorage,
    candidate: Candidate,
) -> dict[str, str | dg.MetadataValue]:
    """Log the candidate's MLflow run (once per run key) and return the metadata to show."""
    customer, key = candidate.customer, candidate.run_key
    training = metadata_for_run_key(context.instance, TRAINING_JOB, customer, key)
    snapshot = training.get("snapshot")
    tags = {
        "snapshot_id": snapshot.get("snapshot_sha") if isinstance(snapshot, dict) else None,
        "decision_id": training.get("decision_id"),
        "job_id": candidate.job_id,
        "dagster_run_id": context.run.run_id,
    }
    holdout = read_holdout(storage.store(), customer, key)
    booster = candidate.load_model()
    forecast = booster_predictor(booster)(holdout)
    plot = forecast_plot_png(
        holdout,
        {"candidate": forecast, "seasonal naive": seasonal_naive(holdout)},
        f"{customer} candidate {key} on its holdout",
    )
    registry = resource.registry()
    run_id = registry.candidate_run(
        customer, key, {name: str(value) for name, value in tags.items() if value}
    )
    intervals = IntervalTable.from_metrics(candidate.metrics)
    model_id = registry.log_candidate(
        run_id,
        booster,
        candidate.metrics,
        holdout[MODEL_FEATURES].head(20),
        plot,
        {METADATA_KEY: intervals.as_metadata()} if intervals is not None else None,
    )
    context.log.info(f"candidate {key} is MLflow run {run_id}, logged model {model_id}")
    return {
        "mlflow_run_id": run_id,
        "mlflow_model_id": model_id,
        "mlflow_tracking_uri": dg.MetadataValue.url(registry.tracking_uri),
        "forecast_vs_actual": dg.MetadataValue.md(
            markdown_image(plot, f"{customer} forecast against actuals")
        ),
    }
