"""One MLflow run per deployment decision, opened by dagster-mlflow's `MlFlow` resource.

A deployment run is one Dagster run for one decision, which is exactly the unit dagster-mlflow
tracks: building its resource opens (or, in a later step of the same Dagster run, finds by the
`dagster_run_id` tag) one MLflow run. What it cannot do on its own is follow the customer: its
experiment is fixed in config. `deployment_mlflow` therefore builds `MlFlow` with the
experiment `deployments/<customer>` of the run's partition, so the deploy-time check logs its
scores and `deployment_decision` its decision into the same run, and the rollout's later analyses
are logged into it by id (`mirror.py`). Registry calls stay on `MlflowClient`
(`MlflowRegistry`). Each step ends the run it used; the next step of the Dagster run resumes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg
import mlflow
from dagster_mlflow.resources import MlFlow

from retrain_assets.registry.mlflow_registry import process_tracking_uri
from retrain_assets.settings import mlflow_tracking_uri

EXPERIMENT_PREFIX = "deployments/"
PARTITION_TAG = "dagster/partition"


def deployment_experiment(customer: str) -> str:
    """Return the MLflow experiment of a customer's deployment runs."""
    return f"{EXPERIMENT_PREFIX}{customer}"


class _ForCustomer:
    """The init context `MlFlow` reads, with the experiment chosen from the run's partition."""

    def __init__(self, context: dg.InitResourceContext, config: dict[str, Any]) -> None:
        self.log = context.log
        self.dagster_run = context.run
        self.run_id = context.run.run_id if context.run is not None else None
        self.resource_config = config


@dg.resource(
    config_schema={
        "tracking_uri": dg.Field(
            dg.Noneable(str),
            default_value=None,
            is_required=False,
            description="Default: MLFLOW_TRACKING_URI, else the local server",
        )
    },
    description="dagster-mlflow's MLflow run for this deployment run, in deployments/<customer>.",
)
def deployment_mlflow(context: dg.InitResourceContext) -> Iterator[MlFlow]:
    """Open (or resume) the deployment run's MLflow run; end it when the step ends."""
    run = context.run
    customer = run.tags.get(PARTITION_TAG) if run is not None else None
    if not customer:
        raise dg.DagsterInvariantViolationError(
            "deployment_mlflow needs a customer partition: deployment runs are per customer"
        )
    tracking_uri: str = context.resource_config.get("tracking_uri") or mlflow_tracking_uri()
    config = {
        "experiment_name": deployment_experiment(customer),
        "mlflow_tracking_uri": tracking_uri,
        "parent_run_id": None,
        "mlflow_run_id": None,
        "env": {},
        "env_to_tag": None,
        "extra_tags": {"customer": customer},
    }
    # dagster-mlflow sets MLflow's process-wide tracking URI and experiment; both are put back
    # when the step ends, so nothing else in the process (registry calls, a later step run in
    # the same process) talks to MLflow through a deployment's settings.
    saved_experiment = mlflow.tracking.fluent._active_experiment_id
    with process_tracking_uri(tracking_uri):
        tracking = MlFlow(_ForCustomer(context, config))
        try:
            yield tracking
        finally:
            tracking.cleanup_on_error()  # dagster-mlflow's own: FAILED/KILLED on an exception
            # otherwise FINISHED: the next step of this Dagster run resumes it by its tag
            if mlflow.active_run() is not None:
                mlflow.end_run()
            mlflow.tracking.fluent._active_experiment_id = saved_experiment


def active_run_id(tracking: MlFlow) -> str:
    """Return the id of the MLflow run the resource opened."""
    # MlflowMeta copies mlflow's module functions onto MlFlow when the class is created
    run = tracking.active_run()  # type: ignore[attr-defined]
    if run is None:
        raise RuntimeError("the deployment_mlflow resource has no active MLflow run")
    return run.info.run_id
