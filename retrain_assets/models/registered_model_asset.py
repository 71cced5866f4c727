"""`registered_model`: the candidate as an MLflow model version, only after the gate passed.

Materialized in the same run as `model_candidate` and its blocking `beats_champion` check, so a
failing check stops it before it starts. Run on its own (a retry, a hand-launched run) it reads
the recorded verdict for the candidate's run key and refuses without a pass. One version per run
key: registering the same run key again returns the same version.
"""

import dagster as dg

from retrain_assets.asset_keys import MODEL_CANDIDATE, REGISTERED_MODEL
from retrain_assets.customers import CUSTOMERS, customer_of
from retrain_assets.models.gate_results import latest_gate_result
from retrain_assets.models.lineage import latest_run_key
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.registry.mlflow_registry import CHALLENGER, model_name
from retrain_assets.registry.resource import MlflowRegistryResource
from retrain_assets.store.resource import ProjectDatabase


class GateNotPassed(dg.Failure):
    """The candidate's run key has no passing verdict from `beats_champion`."""


@dg.asset(
    key=REGISTERED_MODEL,
    group_name="models",
    partitions_def=CUSTOMERS,
    deps=[model_candidate],
    kinds={"mlflow"},
    description="The gated candidate as a version of demand_forecast.<customer>, alias challenger.",
)
def registered_model(
    context: dg.AssetExecutionContext,
    project_db: ProjectDatabase,
    mlflow_registry: MlflowRegistryResource,
) -> dg.MaterializeResult:
    """Register the customer's latest candidate if, and only if, its gate verdict is a pass."""
    customer = customer_of(context)
    key = latest_run_key(context.instance, MODEL_CANDIDATE, customer)
    verdict = latest_gate_result(project_db.connection_url(), key)
    if verdict is None:
        raise GateNotPassed(
            f"refusing to register {customer} candidate {key}: beats_champion never evaluated "
            "it; run the check (or model_candidate with its check) first"
        )
    if not verdict.passed:
        raise GateNotPassed(
            f"refusing to register {customer} candidate {key}: beats_champion failed: "
            f"{verdict.reason}"
        )
    registry = mlflow_registry.registry()
    run_id = registry.candidate_run(customer, key)
    version = registry.register(customer, key, run_id)
    context.log.info(f"{customer} candidate {key} is {model_name(customer)} v{version}")
    return dg.MaterializeResult(
        metadata={
            "run_key": key,
            "model_name": model_name(customer),
            "version": version,
            "alias": CHALLENGER,
            "mlflow_run_id": run_id,
            "gate": verdict.reason,
        },
        data_version=dg.DataVersion(key),
        tags={"retrain/run_key": key},
    )
