"""MLflow as the model registry: candidate runs, logged models and versions per run key."""

from retrain_assets.registry.audit import Problem, audit_registry
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.registry.resource import MlflowRegistryResource

__all__ = ["MlflowRegistry", "MlflowRegistryResource", "Problem", "audit_registry"]
