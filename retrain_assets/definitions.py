"""The `retrain_assets` code location: one Definitions assembled from the modules below it."""

from __future__ import annotations

import dagster as dg

from retrain_assets.automation.customer_discovery import customer_discovery
from retrain_assets.automation.gpu_job_poller import build_gpu_job_poller
from retrain_assets.automation.intervals import (
    LANDING,
    POLICY,
    POLL,
    ROLLOUT,
    SERVING,
    interval_seconds,
)
from retrain_assets.automation.landing_arrivals import build_landing_arrivals
from retrain_assets.automation.retraining_policy import build_retraining_policy
from retrain_assets.automation.rollout_controller import build_rollout_controller
from retrain_assets.automation.serving_report import build_serving_report
from retrain_assets.deployment.tracking import deployment_mlflow
from retrain_assets.features.parquet_store import DailyParquetIOManager, PartitionStorage
from retrain_assets.features.sales_asset import sales
from retrain_assets.features.store_day_features_asset import store_day_features
from retrain_assets.models.beats_champion_check import GateSettings
from retrain_assets.models.challenger_now_check import challenger_beats_champion_now
from retrain_assets.models.checks import MODEL_CHECKS
from retrain_assets.models.deployed_model_asset import deployed_model
from retrain_assets.models.deployment_audit_check import deployments_match_decisions
from retrain_assets.models.deployment_decision_asset import deployment_decision
from retrain_assets.models.freshness_check import serving_model_fresh
from retrain_assets.models.freshness_report import serving_freshness_job
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.models.registered_model_asset import registered_model
from retrain_assets.models.resources import GpuServiceResource
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.policy.approval import approve_drift_retraining
from retrain_assets.registry.resource import MlflowRegistryResource
from retrain_assets.run_workers import install_run_workers
from retrain_assets.settings_model import check_settings
from retrain_assets.store.resource import ProjectDatabase

FEATURES_JOB = "features_job"
DEPLOY_JOB = "deploy_model"


def build_definitions() -> dg.Definitions:
    """Return the code location; resources resolve their environment when a run starts.

    The sensors' tick intervals are read here, from the environment, and nowhere at import: a
    bad value raises `SettingsError` naming the variable, the value and its range.

    There is deliberately no edge from `features` into `models`: the model side learns which
    snapshot to read from its run config (a recorded decision), never from the asset graph.
    """
    check_settings()  # every setting, not only the intervals: refused before the location loads
    storage = PartitionStorage()
    return dg.Definitions(
        assets=[
            sales,
            store_day_features,
            training_job,
            model_candidate,
            registered_model,
            deployment_decision,
            deployed_model,
        ],
        asset_checks=[*MODEL_CHECKS, serving_model_fresh],
        jobs=[
            dg.define_asset_job(
                FEATURES_JOB,
                selection=dg.AssetSelection.groups("features"),
                description="The data side only: sales and store_day_features for a day range.",
                # Two steps that run one after the other: one process per run, not per step
                # (under load, starting a step's process took longer than a day's work).
                executor_def=dg.in_process_executor,
            ),
            approve_drift_retraining,
            serving_freshness_job,
            dg.define_asset_job(
                DEPLOY_JOB,
                selection=dg.AssetSelection.assets(deployment_decision)
                | dg.AssetSelection.checks(challenger_beats_champion_now)
                | dg.AssetSelection.checks(deployments_match_decisions),
                description="Deploy a customer's challenger: the blocking deploy-time check "
                "challenger_beats_champion_now, then deployment_decision (the decision and the "
                "start of its canary rollout), and the deployment audit (evaluated even when the "
                "check refuses).",
            ),
        ],
        sensors=[
            customer_discovery,
            build_gpu_job_poller(interval_seconds(POLL)),
            build_retraining_policy(interval_seconds(POLICY)),
            build_landing_arrivals(interval_seconds(LANDING)),
            build_rollout_controller(interval_seconds(ROLLOUT)),
            build_serving_report(interval_seconds(SERVING)),
        ],
        resources={
            # URLs and tokens come from the environment `retrain-assets up` exports to every
            # process (runtime/environment.py); an unset one fails the run that needs it,
            # naming the variable.
            "project_db": ProjectDatabase(url=dg.EnvVar("RETRAIN_APP_PG_URL")),
            "partition_storage": storage,
            "io_manager": DailyParquetIOManager(storage=storage),
            "gpu_service": GpuServiceResource(
                url=dg.EnvVar("RETRAIN_GPU_URL"), token=dg.EnvVar("RETRAIN_GPU_TOKEN")
            ),
            "mlflow_registry": MlflowRegistryResource(
                tracking_uri=dg.EnvVar("MLFLOW_TRACKING_URI")
            ),
            "gate_settings": GateSettings(),
            "deployment_mlflow": deployment_mlflow,
        },
        # Every run's steps in the run's own process, one after the other: our runs are
        # chains (model_candidate -> beats_champion -> registered_model -> ...), so a process
        # per step bought no parallelism and cost each step a fresh interpreter that imports
        # the code location again (10-40 s on a loaded 2-core machine; BENCHMARKS.md, the
        # hand-off's latency). Jobs may still choose their own executor.
        executor=dg.in_process_executor,
    )


defs = build_definitions()
# In the code server, with RETRAIN_RUN_WORKERS=forkserver: each run a fork of a process with
# this module loaded (run_workers.py)
install_run_workers()
