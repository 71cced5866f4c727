"""`deployment_decision`: materializing it IS the deployment decision, and starts that rollout.

A person launches it from the UI (the `deploy_model` job runs the blocking deploy-time check
`challenger_beats_champion_now` first), or, with the customer's `auto_deploy` on, the run that
registers a passing candidate carries on into it. Nothing else starts a rollout. The run
records one row in `deployment_decisions` (who, why, which version and run key, the verdict it
relies on, the champion it replaces), the rollout and the machine's run `deploy-<decision>`,
advances the machine into its first step and ends: the `rollout_controller` sensor does the
rest. Run without the check, it refuses unless the version has a recent recorded pass against
the current champion (Dagster blocks downstream of a failed check only inside one run).

What serves is another asset, `deployed_model`: it is materialized when the champion moves
(`automation/serving_report.py`), so a decision whose canary is rolled back, or a run whose
gate failed before any decision, never marks the customer's deployment as failed.
"""

import datetime as dt

import dagster as dg
from dagster_mlflow.resources import MlFlow
from pydantic import Field

from retrain_assets.asset_keys import DEPLOYMENT_DECISION, TRAINING_JOB
from retrain_assets.customers import CUSTOMERS
from retrain_assets.deployment.advancing import TickReport, advance_rollouts
from retrain_assets.deployment.records import (
    DeploymentDecision,
    DeploymentRefused,
    DeploymentRequest,
    auto_deploy_settings,
    start_deployment,
)
from retrain_assets.deployment.rollout_machine import rollout_machine
from retrain_assets.deployment.rollout_settings import RolloutSettings, rollout_settings
from retrain_assets.deployment.tracking import active_run_id
from retrain_assets.deployment.versions import RegisteredVersion, challenger_of
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.models.challenger_now_check import CHECK_NAME
from retrain_assets.models.gate_results import (
    GateResult,
    latest_gate_result,
    latest_version_verdict,
)
from retrain_assets.models.lineage import metadata_for_run_key
from retrain_assets.models.registered_model_asset import registered_model
from retrain_assets.policy.run_decision import USER_TAG, lineage
from retrain_assets.registry.mlflow_registry import CHAMPION, model_name
from retrain_assets.registry.resource import MlflowRegistryResource
from retrain_assets.store.resource import ProjectDatabase

SENSOR_TAG = "dagster/sensor_name"
AUTO_SENSOR = "gpu_job_poller"
MANUAL_BY = "a person via the Dagster UI"


class DeploymentNotAllowed(dg.Failure):
    """The deployment was refused before anything was recorded (the message says why)."""


class DeployConfig(dg.Config):
    """Why deploy: recorded with the decision."""

    reason: str | None = Field(
        None, description="Why this deployment (default: who launched it from where)"
    )


@dg.asset(
    key=DEPLOYMENT_DECISION,
    group_name="models",
    partitions_def=CUSTOMERS,
    deps=[registered_model],
    kinds={"mlflow"},
    description="The deployment decision for the customer's challenger, and the start of its "
    "canary rollout (rollout_controller advances it).",
)
def deployment_decision(
    context: dg.AssetExecutionContext,
    config: DeployConfig,
    project_db: ProjectDatabase,
    mlflow_registry: MlflowRegistryResource,
    partition_storage: PartitionStorage,
    deployment_mlflow: dg.ResourceParam[MlFlow],
) -> dg.MaterializeResult:
    """Record the decision for the challenger, start its rollout, advance it into step one."""
    customer, url, run = context.partition_key, project_db.connection_url(), context.run
    settings = rollout_settings()
    registry = mlflow_registry.registry()
    challenger = challenger_of(registry, customer)
    champion = registry.aliases(customer).get(CHAMPION)
    auto = run.tags.get(SENSOR_TAG) == AUTO_SENSOR
    if auto and not auto_deploy_settings(url).get(customer, False):
        raise DeploymentNotAllowed(
            f"auto_deploy is off for {customer} (turned off after this run was requested): "
            f"{challenger.label} stays registered; deploy it from the UI if wanted"
        )
    verdict = _usable_verdict(url, challenger, champion, run, settings)
    who = f"auto_deploy via {AUTO_SENSOR}" if auto else run.tags.get(USER_TAG) or MANUAL_BY
    reason = config.reason or (
        f"auto_deploy is on for {customer}: {challenger.label} passed registration and {CHECK_NAME}"
        if auto
        else f"deployment_decision materialized for {customer} (run {run.run_id})"
    )
    mlflow_run_id = active_run_id(deployment_mlflow)
    try:
        started = start_deployment(
            url,
            DeploymentRequest(
                customer=customer,
                version=challenger.version,
                run_key=challenger.run_key,
                decided_by=who,
                reason=reason,
                gate_result_id=_row_id(verdict),
                previous_champion=champion,
                dagster_run_id=run.run_id,
                mlflow_run_id=mlflow_run_id,
            ),
            lineage(run),
            rollout_machine(settings),
        )
    except DeploymentRefused as err:
        raise DeploymentNotAllowed(str(err)) from err
    decision = started.decision
    # MlflowMeta copies mlflow's module functions onto MlFlow when the class is created
    deployment_mlflow.set_tags(  # type: ignore[attr-defined]
        {
            "deployment_decision": str(decision.id),
            "rollout_id": str(started.rollout.id),
            "version": decision.version,
            "run_key": decision.run_key,
            "decided_by": decision.decided_by,
            "previous_champion": champion or "none",
        }
    )
    report = advance_rollouts(
        url, registry, partition_storage.store(), customers=[customer], settings=settings
    )
    state = _state_after(report, customer)
    context.log.info(
        f"decision {decision.id}: {decision.decided_by} deploys {challenger.label} "
        f"(replacing {champion or 'no champion'}); rollout {started.rollout.id} in {state}"
    )
    return dg.MaterializeResult(
        metadata=_lineage(
            context,
            decision,
            started.rollout.id,
            challenger,
            verdict,
            url,
            state,
            mlflow_run_id,
            started.new,
        ),
        data_version=dg.DataVersion(decision.rollout_key),
        tags={"retrain/deployment_decision": str(decision.id)},
    )


def _usable_verdict(
    url: str,
    challenger: RegisteredVersion,
    champion: str | None,
    run: dg.DagsterRun,
    settings: RolloutSettings,
) -> GateResult:
    """Return the deploy-time pass this deployment relies on, or refuse saying what is missing.

    A pass from this run (or the run it re-executes) is used as is. An older one must be
    younger than `pass_max_age_hours` and judged against the champion of now.
    """
    verdict = latest_version_verdict(url, challenger.customer, challenger.version, CHECK_NAME)
    refuse = f"refusing to deploy {challenger.label}: "
    how = (
        f"launch the whole deploy_model job for {challenger.customer} (it runs {CHECK_NAME} "
        "before deployment_decision): from its launchpad, /locations/retrain_assets/jobs/"
        "deploy_model/playground in the UI, not from a Materialize… button"
    )
    if verdict is None:
        raise DeploymentNotAllowed(refuse + f"{CHECK_NAME} never evaluated it; {how}")
    if not verdict.passed:
        raise DeploymentNotAllowed(refuse + f"{CHECK_NAME} failed: {verdict.reason}")
    if verdict.dagster_run_id in lineage(run) | {run.run_id}:
        return verdict
    if verdict.champion_version != champion:
        raise DeploymentNotAllowed(
            refuse + f"its pass was judged against champion {verdict.champion_version}, the "
            f"champion is now {champion}; {how}"
        )
    age = dt.datetime.now(dt.UTC) - verdict.evaluated_at if verdict.evaluated_at else None
    if age is None or age > dt.timedelta(hours=settings.pass_max_age_hours):
        raise DeploymentNotAllowed(
            refuse + f"its pass is older than {settings.pass_max_age_hours:g} h "
            f"(RETRAIN_DEPLOY_PASS_MAX_AGE_HOURS); {how}"
        )
    return verdict


def _row_id(verdict: GateResult) -> int:
    if verdict.id is None:  # read from gate_results, so it has one
        raise RuntimeError(f"verdict for version {verdict.model_version} has no gate_results id")
    return verdict.id


def _state_after(report: TickReport, customer: str) -> str:
    result = report.results.get(customer)
    if result is None or result.pointer is None:
        return "START (the rollout_controller advances it)"
    return result.pointer.state


def _lineage(
    context: dg.AssetExecutionContext,
    decision: DeploymentDecision,
    rollout_id: int,
    challenger: RegisteredVersion,
    verdict: GateResult,
    url: str,
    state: str,
    mlflow_run_id: str,
    new: bool,
) -> dict[str, int | str | dg.MetadataValue]:
    """Return the deployed model's lineage: decision, run key, snapshot, gate verdicts."""
    training = metadata_for_run_key(
        context.instance, TRAINING_JOB, challenger.customer, challenger.run_key
    )
    snapshot = training.get("snapshot")
    registration = latest_gate_result(url, challenger.run_key)
    return {
        "deployment_decision_id": decision.id,
        "decided_by": decision.decided_by,
        "reason": decision.reason,
        "recorded_by_this_run": new,
        "model_name": model_name(challenger.customer),
        "version": challenger.version,
        "run_key": challenger.run_key,
        "replaces_champion": decision.previous_champion or "none",
        "rollout_id": rollout_id,
        "rollout_state": state,
        "snapshot": dg.MetadataValue.json(
            snapshot
            if isinstance(snapshot, dict)
            else {"note": "no training_job materialization with this run key"}
        ),
        "training_decision_id": str(training.get("decision_id", "unknown")),
        "gate_beats_champion": (
            f"{'passed' if registration.passed else 'failed'}: {registration.reason}"
            if registration
            else "no registration verdict recorded for this run key"
        ),
        f"gate_{CHECK_NAME}": f"passed: {verdict.reason} (gate_results {verdict.id})",
        "mlflow_run_id": mlflow_run_id,
    }
