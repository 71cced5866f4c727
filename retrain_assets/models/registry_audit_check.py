"""`one_version_per_run_key`: the registry's invariant as an asset check on `registered_model`.

The same rule `retrain-assets audit` enforces, shown per customer in the UI: no run key may have
more than one MLflow candidate run or more than one registered version.
"""

import dagster as dg

from retrain_assets.customers import CUSTOMERS, customer_of
from retrain_assets.models.registered_model_asset import registered_model
from retrain_assets.registry.audit import audit_registry
from retrain_assets.registry.mlflow_registry import experiment_name, model_name
from retrain_assets.registry.resource import MlflowRegistryResource


@dg.asset_check(
    asset=registered_model,
    name="one_version_per_run_key",
    partitions_def=CUSTOMERS,
    description="No run key has two candidate runs or two registered versions in MLflow.",
)
def one_version_per_run_key(
    context: dg.AssetCheckExecutionContext, mlflow_registry: MlflowRegistryResource
) -> dg.AssetCheckResult:
    """Audit this customer's experiment and registered model."""
    customer = customer_of(context)
    problems = audit_registry(mlflow_registry.registry(), customer)
    return dg.AssetCheckResult(
        passed=not problems,
        description=(
            "; ".join(p.message for p in problems)
            or f"every run key has at most one run in {experiment_name(customer)} "
            f"and one version of {model_name(customer)}"
        ),
        metadata={"duplicated_run_keys": sorted({p.run_key for p in problems})},
    )
