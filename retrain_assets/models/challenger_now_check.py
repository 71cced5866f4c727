"""`challenger_beats_champion_now`: the blocking deploy-time gate on `registered_model`.

Right before a deployment, the challenger (alias `challenger`) and the champion in production
are both loaded from the registry and scored on the newest days with actual sales, newer than
the candidate's holdout where such days exist. A fail stops `deployment_decision` in that run; the
verdict is a row in `gate_results` (gate = this check's name, with the version), because a
later run of `deployment_decision` alone must refuse a version without a recorded pass. The scores
go into the deployment's MLflow run (dagster-mlflow), the one its decision will be recorded in.
"""

import math

import dagster as dg
import numpy as np
import pandas as pd
from dagster_mlflow.resources import MlFlow

from retrain_assets.customers import CUSTOMERS
from retrain_assets.deployment.recent_window import recent_window, window_rows
from retrain_assets.deployment.rollout_settings import rollout_settings
from retrain_assets.deployment.tracking import active_run_id
from retrain_assets.deployment.versions import challenger_of
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.models.deploy_gate import judge_deploy
from retrain_assets.models.gate import Predict, ReferenceModel, booster_predictor
from retrain_assets.models.gate_results import GateResult, record_gate_result
from retrain_assets.models.registered_model_asset import registered_model
from retrain_assets.models.scoring import Verdict
from retrain_assets.registry.mlflow_registry import CHAMPION, MlflowRegistry, model_name
from retrain_assets.registry.resource import MlflowRegistryResource
from retrain_assets.store.resource import ProjectDatabase

CHECK_NAME = "challenger_beats_champion_now"


@dg.asset_check(
    asset=registered_model,
    name=CHECK_NAME,
    blocking=True,
    partitions_def=CUSTOMERS,
    description=(
        "Deploy-time gate: the challenger and the champion, both loaded now, scored on the "
        "newest days with actuals (after the candidate's holdout where they exist); the "
        "challenger's WAPE must be lower by RETRAIN_DEPLOY_GATE_MARGIN."
    ),
)
def challenger_beats_champion_now(
    context: dg.AssetCheckExecutionContext,
    project_db: ProjectDatabase,
    mlflow_registry: MlflowRegistryResource,
    partition_storage: PartitionStorage,
    deployment_mlflow: dg.ResourceParam[MlFlow],
) -> dg.AssetCheckResult:
    """Re-score challenger and champion on the newest actuals; record and return the verdict."""
    customer, url = context.partition_key, project_db.connection_url()
    settings = rollout_settings()
    registry = mlflow_registry.registry()
    challenger = challenger_of(registry, customer)
    champion_version = registry.aliases(customer).get(CHAMPION)
    window = recent_window(
        url, partition_storage.store(), customer, challenger.run_key, settings.check_days
    )
    rows = window_rows(partition_storage.store(), customer, window)
    champion = None
    if champion_version is not None and champion_version != challenger.version:
        champion = ReferenceModel(
            f"champion {model_name(customer)} v{champion_version}",
            booster_predictor(registry.load_version(customer, champion_version)),
            CHAMPION,
            champion_version,
        )
    outcome = judge_deploy(
        rows,
        _lazy_predictor(registry, customer, challenger.version),
        champion,
        settings.deploy_margin,
        challenger.label,
        already_champion=champion_version == challenger.version,
    )
    verdict, shown = outcome.verdict, outcome.metadata
    gate_result_id = record_gate_result(
        url,
        GateResult(
            run_key=challenger.run_key,
            customer=customer,
            passed=verdict.passed,
            candidate_wape=verdict.candidate_wape,
            reference_wape=verdict.reference_wape,
            reference=verdict.reference,
            champion_version=champion_version,
            margin=settings.deploy_margin,
            holdout_window=window.span,
            rows_scored=len(rows),
            reason=verdict.reason,
            dagster_run_id=context.run.run_id,
            reference_version=champion_version,
            gate=CHECK_NAME,
            model_version=challenger.version,
        ),
    )
    _log_scores(deployment_mlflow, challenger.version, champion_version, verdict, len(rows))
    context.log.info(f"{customer} {challenger.label}: {verdict.reason} ({window.note})")
    return dg.AssetCheckResult(
        passed=verdict.passed,
        description=verdict.reason,
        metadata={
            **shown,
            "challenger_version": challenger.version,
            "run_key": challenger.run_key,
            "champion_version": champion_version or "none (seasonal naive)",
            "scored_days": window.span,
            "scored_days_note": window.note,
            "rows_scored": len(rows),
            "gate_result_id": gate_result_id,
            "mlflow_run_id": active_run_id(deployment_mlflow),
        },
    )


def _lazy_predictor(registry: MlflowRegistry, customer: str, version: str) -> Predict:
    """Return the version's forecaster, loading it on first use (not for an already-champion)."""
    loaded: list[Predict] = []

    def predict(frame: pd.DataFrame) -> np.ndarray:
        if not loaded:
            loaded.append(booster_predictor(registry.load_version(customer, version)))
        return loaded[0](frame)

    return predict


def _log_scores(
    tracking: MlFlow, version: str, champion: str | None, verdict: Verdict, rows: int
) -> None:
    """Log the deploy-time scores into the deployment's MLflow run.

    `set_tags` and `log_metrics` are mlflow's own, which MlflowMeta copies onto MlFlow when the
    class is created (invisible to a type checker).
    """
    tracking.set_tags(  # type: ignore[attr-defined]
        {
            "challenger_version": version,
            "champion_version": champion or "none",
            "deploy_check": "passed" if verdict.passed else "failed",
            "deploy_check_reason": verdict.reason[:5000],
        }
    )
    scores = {
        "check_challenger_wape": verdict.candidate_wape,
        "check_reference_wape": verdict.reference_wape,
    }
    tracking.log_metrics(  # type: ignore[attr-defined]
        {
            "check_passed": 1.0 if verdict.passed else 0.0,
            "check_rows_scored": float(rows),
            # an unscorable forecast's NaN is not logged; the reason says why
            **{k: float(v) for k, v in scores.items() if math.isfinite(v)},
        }
    )
