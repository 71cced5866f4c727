"""`beats_champion`: the blocking evaluation gate on each customer's candidate.

The candidate and its reference are both scored now, on the same holdout the candidate never
trained on; a metric recorded in the past is never used. The reference is the champion, else
the current challenger, else seasonal naive (`reference.py`), so the registry never takes a
step back before a first champion. Every verdict is also a row in `gate_results`, because
Dagster only blocks downstream assets inside the run that evaluated the check, and
`registered_model` run on its own must still refuse a candidate that failed. A failed re-gate
of a version that already holds `challenger` takes the alias away, and says so.

The rule that decides is RETRAIN_GATE_RULE (`gate.py`'s `judge_gate`): `margin` (the default)
or `evidence` (`gate_evidence.py`: windows, a paired bootstrap interval, a store guard). The
check's metadata shows both, and `rule` names the one that decided. The candidate's prediction
intervals are judged on the same holdout (`gate_coverage.py`): each level's coverage is shown,
and an interval covering far less than its level fails a challenger that would have passed
(`rule`: coverage). A first model (reference: seasonal naive) that wins is not refused for its
intervals: they are widened on the holdout, written into its MLflow model's metadata (which the
registered version and the service read), and `interval_calibration` says so.
"""

import math

import dagster as dg
from pydantic import Field

from retrain_assets.asset_keys import MODEL_CANDIDATE
from retrain_assets.customers import CUSTOMERS, customer_of
from retrain_assets.features.evidence import EVIDENCE_COLUMNS, EvidenceRules, judge_parts
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.features.training_export import read_export_part, read_holdout
from retrain_assets.models.candidates import CandidateTable
from retrain_assets.models.gate import GateMetadata, booster_predictor, gate_rule
from retrain_assets.models.gate_decision import decide_gate
from retrain_assets.models.gate_evidence import GateRules
from retrain_assets.models.gate_results import GateResult, record_gate_result
from retrain_assets.models.handoff_errors import doing, snapshot_window
from retrain_assets.models.lineage import latest_run_key
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.models.reference import choose_reference
from retrain_assets.prediction_intervals import METADATA_KEY, IntervalTable, coverage_tolerance
from retrain_assets.registry.mlflow_registry import CHALLENGER, MlflowRegistry, model_name
from retrain_assets.registry.resource import MlflowRegistryResource
from retrain_assets.settings import gate_margin
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
        "The candidate's WAPE on its fresh holdout beats the champion (else the challenger, "
        "else seasonal naive) re-scored now on the same rows, by the margin. Its prediction "
        "intervals must cover the holdout near their level; a first model's short ones are "
        "widened on the holdout instead (interval_calibration says which it carries)."
    ),
)
def beats_champion(
    context: dg.AssetCheckExecutionContext,
    project_db: ProjectDatabase,
    partition_storage: PartitionStorage,
    mlflow_registry: MlflowRegistryResource,
    gate_settings: GateSettings,
) -> dg.AssetCheckResult:
    """Score candidate and reference on the candidate's holdout; record and return the verdict."""
    customer, db_url = customer_of(context), project_db.connection_url()
    key = latest_run_key(context.instance, MODEL_CANDIDATE, customer)
    window = snapshot_window(context.instance, customer, key)
    candidate = CandidateTable(db_url, partition_storage.root()).get(key)
    if candidate is None:
        raise LookupError(f"run {key} of {customer} has no stored candidate to evaluate")
    with doing("loading the candidate model", customer, key, window):
        booster = candidate.load_model()
    registry = mlflow_registry.registry()
    with doing("choosing the reference model", customer, key, window):
        chosen = choose_reference(registry, customer, key)
    margin = gate_settings.resolved_margin()
    store = partition_storage.store()
    evidence_rules = EvidenceRules.from_settings()
    with doing("judging the holdout's evidence", customer, key, window):
        holdout = read_holdout(store, customer, key)
        evidence = judge_parts(
            customer,
            read_export_part(store, customer, key, "train", EVIDENCE_COLUMNS),
            holdout,
            evidence_rules,
        )
    trainer = IntervalTable.from_metrics(candidate.metrics)
    with doing("scoring the candidate and its reference on the holdout", customer, key, window):
        gated = decide_gate(
            holdout,
            booster_predictor(booster),
            chosen.model,
            margin,
            evidence,
            GateRules.from_settings(),
            evidence_rules,
            gate_rule(),
            trainer,
            coverage_tolerance(),
        )
    outcome = gated.outcome
    verdict, shown = outcome.verdict, outcome.metadata
    if verdict.passed and gated.served is not None and gated.served != trainer:
        with doing("writing the widened prediction intervals to MLflow", customer, key, window):
            registry.set_model_metadata(
                registry.candidate_run(customer, key), METADATA_KEY, gated.served.as_metadata()
            )
    reason = verdict.reason
    if not verdict.passed:
        reason += _withdraw_challenger(context, registry, customer, key, verdict.reason)
    shown = {
        **shown,
        "reason": reason,
        "champion_version": (
            f"{model_name(customer)} v{chosen.champion_version}"
            if chosen.champion_version
            else "none"
        ),
    }
    record_gate_result(
        db_url,
        GateResult(
            run_key=key,
            customer=customer,
            passed=verdict.passed,
            candidate_wape=verdict.candidate_wape,
            reference_wape=verdict.reference_wape,
            reference=verdict.reference,
            champion_version=chosen.champion_version,
            margin=verdict.margin,
            holdout_window=str(shown["holdout_window"]),
            rows_scored=int(shown["rows_scored"]),
            reason=reason,
            dagster_run_id=context.run.run_id,
            reference_version=chosen.model.version if chosen.model else None,
        ),
    )
    _log_to_mlflow(registry, customer, key, verdict.passed, shown)
    context.log.info(f"{customer} candidate {key}: {reason}")
    return check_result(key, verdict.passed, reason, shown)


def check_result(key: str, passed: bool, reason: str, shown: GateMetadata) -> dg.AssetCheckResult:
    """Return what the Checks tab shows: the verdict, its reason in words, every number."""
    return dg.AssetCheckResult(
        passed=passed, description=reason, metadata={"run_key": key, **shown}
    )


def _withdraw_challenger(
    context: dg.AssetCheckExecutionContext,
    registry: MlflowRegistry,
    customer: str,
    key: str,
    reason: str,
) -> str:
    """Take `challenger` from this run key's version after a failed re-gate; say so, or ""."""
    removed = [
        version.version
        for version in registry.versions_of(customer, key)
        if CHALLENGER in version.aliases
        and registry.withdraw_alias(customer, CHALLENGER, version.version, reason)
    ]
    if not removed:
        return ""
    context.log.warning(
        f"{customer}: alias {CHALLENGER} removed from {model_name(customer)} "
        f"v{', v'.join(removed)} (run key {key}): the re-gate failed: {reason}"
    )
    return f"; alias {CHALLENGER} removed from version {', '.join(removed)}"


def _log_to_mlflow(
    registry: MlflowRegistry, customer: str, key: str, passed: bool, shown: GateMetadata
) -> None:
    """Put the verdict on the candidate's MLflow run too, for whoever browses MLflow."""
    names = [
        "candidate_wape",
        "reference_wape",
        *(n for n in shown if n.startswith(("coverage_", "served_halfwidth_"))),
    ]
    scores = {f"gate_{name}": shown[name] for name in names}
    metrics = {
        "gate_passed": 1.0 if passed else 0.0,
        # an unscorable forecast's NaN is not logged; the reason says why
        **{
            name: value
            for name, value in scores.items()
            if isinstance(value, float) and math.isfinite(value)
        },
    }
    registry.log_metrics(registry.candidate_run(customer, key), metrics)
