"""MLflow as the model registry: candidate runs, logged models and versions per run key."""

from retrain_assets.registry.mlflow_registry import MlflowRegistry, Problem
from retrain_assets.registry.resource import MlflowRegistryResource

__all__ = ["MlflowRegistry", "MlflowRegistryResource", "Problem"]
