"""`deployments_match_decisions`: the deployment audit as an asset check on `deployed_model`.

The rule `retrain-assets audit` enforces, per customer in the UI: every move of alias
`champion` matches one deployment decision and one promoted rollout, every decision has at
most one rollout, and the aliases agree with the records and with `serving_routes`.

It depends on nothing in a run, so it is evaluated in every run that selects it: a blocking
check that fails before `deployment_decision` (the gate in an `auto_deploy` run, the deploy-time
check in `deploy_model`) used to leave it planned and never run, which Dagster shows on
`deployed_model`'s Checks tab as "Execution failed" (red) for a customer whose model serves.
"""

import dagster as dg

from retrain_assets.asset_keys import DEPLOYED_MODEL
from retrain_assets.customers import CUSTOMERS
from retrain_assets.deployment.audit import audit_deployments
from retrain_assets.registry.resource import MlflowRegistryResource
from retrain_assets.store.resource import ProjectDatabase

CHECK_NAME = "deployments_match_decisions"


@dg.asset_check(
    asset=DEPLOYED_MODEL,  # no step of its own, and no dependency on the decision (above)
    name=CHECK_NAME,
    partitions_def=CUSTOMERS,
    description="Every champion move has one decision and one promoted rollout; aliases, "
    "records and serving routes agree.",
)
def deployments_match_decisions(
    context: dg.AssetCheckExecutionContext,
    project_db: ProjectDatabase,
    mlflow_registry: MlflowRegistryResource,
) -> dg.AssetCheckResult:
    """Audit this customer's deployments."""
    customer = context.partition_key
    problems = audit_deployments(project_db.connection_url(), mlflow_registry.registry(), customer)
    return dg.AssetCheckResult(
        passed=not problems,
        description="; ".join(p.message for p in problems)
        or f"every champion move of {customer} matches one decision and one promoted rollout",
        metadata={"problems": len(problems)},
    )
