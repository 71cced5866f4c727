"""The Dagster resource that hands assets an `MlflowRegistry`."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.settings import mlflow_tracking_uri


class MlflowRegistryResource(dg.ConfigurableResource):
    """The MLflow tracking server and model registry, as an `MlflowRegistry`.

    Why not dagster-mlflow's resource: docs/decisions.md, "MLflow through `MlflowClient`".
    """

    tracking_uri: str | None = Field(
        default=None,
        description="MLflow tracking URI; default MLFLOW_TRACKING_URI, else the local server",
    )

    def registry(self) -> MlflowRegistry:
        """Return a registry on the configured server (the settings' URI when not configured)."""
        return MlflowRegistry(self.tracking_uri or mlflow_tracking_uri())
