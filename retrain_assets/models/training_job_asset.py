"""`training_job`: compute the run key, export the snapshot, submit the GPU job, and END.

The run never waits for the training: it advances the customer's training machine until it
yields in POLL_JOB (or finds the work already done) and ends. Its time is the snapshot's export
and the first submission (a failed one is retried by `gpu_job_poller` after its wait), not the
GPU job's hours. The `gpu_job_poller` sensor takes over from there.

Before anything is exported or submitted, the window is judged against the customer's own rows
(`features/evidence.py`, the rule the gate uses too): a window that cannot be judged is refused
as a recorded transition of the training machine (INITIAL -> FAILED, with the numbers and the
latest window that could be judged), whoever launched the run; no GPU job, no candidate.
"""

import datetime as dt

import dagster as dg
from pydantic import Field

from retrain_assets.asset_keys import TRAINING_JOB
from retrain_assets.customers import CUSTOMERS, customer_of
from retrain_assets.features.evidence import HOLDOUT_DAYS, judged_holdout_days
from retrain_assets.features.feature_math import FEATURE_VERSION
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.features.training_export import (
    LABEL,
    MODEL_FEATURES,
    customer_rows,
    export_customer,
    export_folder,
)
from retrain_assets.machines.backoff import RETRY_AT
from retrain_assets.machines.engine import advance
from retrain_assets.machines.store import latest_notes
from retrain_assets.machines.table import FAILED
from retrain_assets.machines.training import JOB_ID, start_training, training_machine
from retrain_assets.models.resources import GpuServiceResource, training_services
from retrain_assets.models.run_key import code_commit, run_key
from retrain_assets.models.window_judgement import judge_snapshot
from retrain_assets.policy.run_decision import claim_for_run, manual_decision, policy_window
from retrain_assets.prediction_intervals import IntervalRules
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets.store.snapshot_ref import resolve_snapshot


class WindowRefused(ValueError):
    """The window does not hold enough of the customer's rows to be judged; nothing was spent."""


class FaultsConfig(dg.Config):
    """Fault injection forwarded to the GPU service (honoured only with --allow-faults)."""

    fail_at_round: int | None = None
    crash_at_round: int | None = None
    slow_seconds_per_round: float | None = None
    on_attempts: list[int] = Field(default_factory=lambda: [1])

    def as_spec(self) -> dict[str, object]:
        """Return the service's `faults` object, without unset fields."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class TrainingJobConfig(dg.Config):
    """The snapshot to read and the training settings; the decision fills these in."""

    decision_id: int | None = Field(
        None,
        description="The retraining decision this run trains for (set by retraining_policy); "
        "without one, the run records a manual decision",
    )
    first_day: str | None = Field(
        None, description="First snapshot day (default: the policy's choice, docs/policy.md)"
    )
    last_day: str | None = Field(None, description="Last snapshot day (default: latest published)")
    data_versions: dict[str, str] = Field(
        default_factory=dict, description="Expected data version per day; a change refuses"
    )
    holdout_days: int = Field(
        HOLDOUT_DAYS, ge=1, description="Latest days kept for the evaluation gate"
    )
    num_boost_round: int = Field(200, ge=1, le=5000)
    learning_rate: float = Field(0.05, gt=0)
    num_leaves: int = Field(31, ge=2)
    min_data_in_leaf: int = Field(20, ge=1)
    seed: int = 7
    checkpoint_every: int = Field(25, ge=1)
    faults: FaultsConfig | None = Field(
        None, description="GPU-service fault injection (tests; needs --allow-faults)"
    )

    def export_holdout_days(self) -> int:
        """Return the days the export keeps apart: enough for the gate's windows too.

        RETRAIN_GATE_WINDOWS x RETRAIN_GATE_WINDOW_DAYS longer than `holdout_days` (issue 26:
        the gate judges several rolling-origin windows the candidate never trained on) makes
        the holdout that long; the defaults (1 x 7) leave it as it is.
        """
        return judged_holdout_days(self.holdout_days)

    def training_config(self) -> dict[str, object]:
        """Return what determines the trained model (part of the run key)."""
        return {
            "holdout_days": self.export_holdout_days(),
            "params": {
                "num_boost_round": self.num_boost_round,
                "learning_rate": self.learning_rate,
                "num_leaves": self.num_leaves,
                "min_data_in_leaf": self.min_data_in_leaf,
                "seed": self.seed,
            },
            "features": MODEL_FEATURES,
            "label": LABEL,
            "intervals": IntervalRules.from_settings().as_spec(),
        }


def job_spec(config: TrainingJobConfig, customer: str) -> dict[str, object]:
    """Return the GPU job's spec but its dataset: the columns, LightGBM settings and intervals.

    The decision benchmark trains with this too, so it trains what the platform trains.
    """
    trained = config.training_config()
    spec: dict[str, object] = {
        "customer": customer,
        "label": LABEL,
        "features": MODEL_FEATURES,
        "params": trained["params"],
        "checkpoint_every": config.checkpoint_every,
        **({"faults": config.faults.as_spec()} if config.faults else {}),
    }
    if trained["intervals"] is not None:  # the trainer computes the widths the model carries
        spec["intervals"] = trained["intervals"]
    return spec


def _day(text: str | None) -> dt.date | None:
    return dt.date.fromisoformat(text) if text else None


@dg.asset(
    key=TRAINING_JOB,
    group_name="models",
    partitions_def=CUSTOMERS,
    kinds={"python"},
    description="Submits (or finds) the GPU training job for a snapshot; never waits for it.",
)
def training_job(
    context: dg.AssetExecutionContext,
    config: TrainingJobConfig,
    project_db: ProjectDatabase,
    partition_storage: PartitionStorage,
    gpu_service: GpuServiceResource,
) -> dg.MaterializeResult:
    """Run the training machine up to POLL_JOB for this customer and snapshot."""
    customer, db_url = customer_of(context), project_db.connection_url()
    decision = None
    if config.decision_id is not None:
        requested = (config.first_day, config.last_day, config.data_versions)
        decision = claim_for_run(db_url, customer, config.decision_id, requested, context.run)
        chosen = decision.snapshot
        ref = resolve_snapshot(db_url, chosen.first_day, chosen.last_day, chosen.data_versions, 90)
    elif config.first_day or config.last_day or config.data_versions:
        ref = resolve_snapshot(
            db_url,
            _day(config.first_day),
            _day(config.last_day),
            config.data_versions or None,
            90,
        )
    else:  # no snapshot named: the one the policy would choose for this customer now
        ref = policy_window(db_url, customer)
    key = run_key(ref.sha_for(customer), FEATURE_VERSION, config.training_config(), code_commit())
    frame = customer_rows(partition_storage.store(), customer, ref)
    holdout_days = config.export_holdout_days()
    evidence = judge_snapshot(db_url, partition_storage.store(), customer, ref, frame, holdout_days)
    spec = job_spec(config, customer)
    machine = training_machine()
    judged = evidence.as_metadata()
    if not evidence.enough:  # refused by the machine's INITIAL, recorded, nothing exported
        start_training(db_url, customer, key, spec, machine=machine, retry=True, evidence=judged)
        services = training_services(db_url, gpu_service.client(), partition_storage.root())
        refused = advance(db_url, machine, customer, services)
        why = refused.pointer.reason if refused.pointer else evidence.reason
        raise WindowRefused(f"training run {key} for {customer} refused: {why}")
    exported = export_customer(
        partition_storage.store(),
        customer,
        ref,
        holdout_days,
        export_folder(partition_storage.store(), customer, key),
        frame,
    )
    spec["dataset_url"] = exported.train_path
    start_training(db_url, customer, key, spec, machine=machine, retry=True, evidence=judged)
    if decision is None:  # started (not refused as busy), not submitted yet: record it now
        decision = manual_decision(db_url, customer, ref, context.run)
    context.log.info(f"decision {decision.id} ({decision.policy}): {decision.reason}")
    result = advance(
        db_url,
        machine,
        customer,
        training_services(db_url, gpu_service.client(), partition_storage.root()),
    )
    pointer = result.pointer
    if pointer is None:
        raise RuntimeError(f"{customer}'s training machine is being advanced elsewhere; retry")
    if pointer.state == FAILED:
        raise RuntimeError(f"training run {key} for {customer} failed: {pointer.reason}")
    context.log.info(f"run key {key}: machine in {pointer.state}; this run ends here")
    waiting: dict[str, str] = {}
    if RETRY_AT in pointer.payload:  # a failed submission: the sensor tries again when due
        last = latest_notes(db_url, [pointer]).get((pointer.machine, customer))
        waiting = {
            "last_error": pointer.last_error or "",
            "next_try": (last.note or "") if last else "",
        }
        context.log.warning(f"{customer}: {waiting['last_error']}; {waiting['next_try']}")
    return dg.MaterializeResult(
        metadata={
            "run_key": key,
            "decision_id": decision.id,
            "decision_policy": decision.policy,
            "decided_by": decision.decided_by,
            "job_id": str(pointer.payload.get(JOB_ID)),
            "machine_state": pointer.state,
            "snapshot": dg.MetadataValue.json(ref.as_metadata(customer)),
            "train_rows": exported.train_rows,
            "holdout_rows": exported.holdout_rows,
            "holdout_path": dg.MetadataValue.path(exported.holdout_path),
            "evidence": evidence.reason,
            "code_commit": code_commit(),
            **waiting,
        },
        data_version=dg.DataVersion(key),
    )
