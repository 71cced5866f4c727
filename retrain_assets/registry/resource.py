"""The Dagster resource that hands assets an `MlflowRegistry`."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.settings import mlflow_tracking_uri


class MlflowRegistryResource(dg.ConfigurableResource):
    """The MLflow tracking server and model registry, as an `MlflowRegistry`.

    Why not dagster-mlflow's `mlflow_tracking` resource? Read in dagster-mlflow 0.29.27's
    source (`dagster_mlflow/resources.py`): building the resource *is* opening an MLflow run.
    It sets the process-wide tracking URI and one experiment fixed in its config, then starts
    (or resumes) the MLflow run tagged with the *Dagster* run id and makes it the active run
    (or the single `mlflow_run_id` given in config). A retried materialization is a new Dagster
    run, so it gets a second MLflow run for the same run key, and one experiment per config
    cannot follow the customer partition. Registry calls are only reachable through it
    indirectly: it re-exports the `mlflow.*` functions (`register_model`, ...) and carries a
    bare `MlflowClient()` as `tracking_client`, both bound to that process-wide state; it has
    no registry API of its own. So runs keyed by *our* run key, explicit run ids and registry
    calls go through an `MlflowClient` on an explicit URI here, and building this resource
    starts nothing.
    """

    tracking_uri: str | None = Field(
        default=None,
        description="MLflow tracking URI; default MLFLOW_TRACKING_URI, else the local server",
    )

    def registry(self) -> MlflowRegistry:
        """Return a registry on the configured server (the settings' URI when not configured)."""
        return MlflowRegistry(self.tracking_uri or mlflow_tracking_uri())
