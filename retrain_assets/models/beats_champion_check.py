"""`beats_champion`: the blocking evaluation gate on each customer's candidate.

The candidate and the champion in production are both scored now, on the same holdout the
candidate never trained on; a metric recorded in the past is never used. With no champion
yet the candidate must beat a seasonal-naive forecast. Every verdict is also a row in
`gate_results`, because Dagster only blocks downstream assets inside the run that evaluated
the check, and `registered_model` run on its own must still refuse a candidate that failed.
"""

import math

import dagster as dg
from pydantic import Field

from retrain_assets.customers import CUSTOMERS, customer_of
from retrain_assets.models.candidates import CandidateTable
from retrain_assets.models.export import MODEL_FEATURES, read_holdout
from retrain_assets.models.gate import Champion, evaluate
from retrain_assets.models.gate_results import GateResult, record_gate_result
from retrain_assets.models.lineage import latest_run_key
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.registry.mlflow_registry import MlflowRegistry, model_name
from retrain_assets.registry.resource import MlflowRegistryResource
from retrain_assets.settings import gate_margin, storage_root
from retrain_assets.store.resource import ProjectDatabase

CHECK_NAME = "beats_champion"


class GateSettings(dg.ConfigurableResource):
    """The gate's margin: how much lower (relative) the candidate's WAPE must be."""

    margin: float | None = Field(
        default=None, ge=0.0, lt=1.0, description="Default: $RETRAIN_GATE_MARGIN, else 0.02"
    )

    def resolved_margin(self) -> float:
        """Return the configured margin, else the environment's."""
        return self.margin if self.margin is not None else gate_margin()


@dg.asset_check(
    asset=model_candidate,
    name=CHECK_NAME,
    blocking=True,
    partitions_def=CUSTOMERS,
    description=(
        "The candidate's WAPE on its fresh holdout beats the champion re-scored now on the "
        "same rows (or seasonal naive when there is no champion) by the margin."
    ),
)
def beats_champion(
    context: dg.AssetCheckExecutionContext,
    project_db: ProjectDatabase,
    mlflow_registry: MlflowRegistryResource,
    gate_settings: GateSettings,
) -> dg.AssetCheckResult:
    """Score candidate and champion on the candidate's holdout; record and return the verdict."""
    customer, db_url = customer_of(context), project_db.connection_url()
    key = latest_run_key(context.instance, model_candidate.key, customer)
    candidate = CandidateTable(db_url, storage_root()).get(key)
    if candidate is None:
        raise LookupError(f"run {key} of {customer} has no stored candidate to evaluate")
    booster = candidate.load_model()
    registry = mlflow_registry.registry()
    loaded = registry.load_champion(customer)
    champion = None
    if loaded is not None:
        version, champion_model = loaded
        champion = Champion(
            f"{model_name(customer)} v{version}",
            lambda frame: champion_model.predict(frame[MODEL_FEATURES]),
        )
    margin = gate_settings.resolved_margin()
    outcome = evaluate(
        read_holdout(customer, key),
        lambda frame: booster.predict(frame[MODEL_FEATURES]),
        champion,
        margin,
    )
    verdict, shown = outcome.verdict, outcome.metadata
    record_gate_result(
        db_url,
        GateResult(
            run_key=key, customer=customer, passed=verdict.passed,
            candidate_wape=verdict.candidate_wape, reference_wape=verdict.reference_wape,
            reference=verdict.reference,
            champion_version=loaded[0] if loaded is not None else None,
            margin=margin, holdout_window=str(shown["holdout_window"]),
            rows_scored=int(shown["rows_scored"]), reason=verdict.reason,
            dagster_run_id=context.run.run_id,
        ),
    )
    _log_to_mlflow(registry, customer, key, verdict.passed, shown)
    context.log.info(f"{customer} candidate {key}: {verdict.reason}")
    return dg.AssetCheckResult(
        passed=verdict.passed,
        description=verdict.reason,
        metadata={"run_key": key, **shown},
    )


def _log_to_mlflow(
    registry: MlflowRegistry, customer: str, key: str, passed: bool, shown: dict[str, object]
) -> None:
    """Put the verdict on the candidate's MLflow run too, for whoever browses MLflow."""
    scores = {f"gate_{name}": shown[name] for name in ("candidate_wape", "reference_wape")}
    metrics = {
        "gate_passed": 1.0 if passed else 0.0,
        # an unscorable forecast's NaN is not logged; the reason says why
        **{name: value for name, value in scores.items()
           if isinstance(value, float) and math.isfinite(value)},
    }
    registry.log_metrics(registry.candidate_run(customer, key), metrics)
