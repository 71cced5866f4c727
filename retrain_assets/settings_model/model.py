"""Every environment setting of the package: one typed model with its defaults and bounds.

`RetrainSettings` is the one place a `RETRAIN_*` variable is named, typed, bounded and
described: the accessors (settings.py and each area's settings function) read their values
from it, every process validates it whole before it starts (current.py), and
docs/configuration.md is generated from it (reference_docs.py), so the page's defaults are the
code's. A field that is None when unset says what that means in its `unset` text.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

PREFIX = "RETRAIN_"
MAX_LEVELS = 5
# Fields whose empty value means something of its own (no intervals), not "unset".
EMPTY_IS_A_VALUE = frozenset({"interval_levels"})
# Choices and switches are spelt in any case and with spaces around them.
_FOLDED = frozenset(
    {
        "run_workers",
        "training_backend",
        "gate_rule",
        "canary_rule",
        "canary_final_rule",
        "interval_scale",
        "drift_approval",
    }
)
# What a prediction interval's half-width multiplies per row (prediction_intervals.scale_of).
IntervalScale = Literal["absolute", "sqrt", "linear"]


def unset(meaning: str, description: str) -> Any:
    """Return a field that is None when unset, `meaning` saying what the code does then."""
    return Field(None, description=description, json_schema_extra={"unset": meaning})


def parse_fractions(text: str) -> tuple[float, ...]:
    """Return the canary weights of "0.10,0.50": each in [0.01, 0.99], increasing, distinct %.

    Raises:
        ValueError: the reason the text is not such a list.
    """
    try:
        weights = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise ValueError("not comma-separated numbers") from None
    if not all(math.isfinite(w) and 0.01 <= w <= 0.99 for w in weights):
        raise ValueError("a weight is outside [0.01, 0.99]")
    if list(weights) != sorted(set(weights)):
        raise ValueError("the weights do not increase")
    if len({round(w * 100) for w in weights}) != len(weights):
        raise ValueError("two weights round to the same percent")
    return weights


def parse_levels(text: str) -> tuple[float, ...]:
    """Return the interval levels of "80,95", ascending; "" or "none": none.

    Raises:
        ValueError: the reason (a level that is not a number in (0, 100), a repeated level, or
            more than MAX_LEVELS of them).
    """
    text = text.strip()
    if text.lower() in ("", "none"):
        return ()
    levels: list[float] = []
    for part in text.split(","):
        try:
            level = float(part.strip())
        except ValueError:
            raise ValueError(f"{part.strip()!r} is not a level (a percentage such as 80)") from None
        if not (math.isfinite(level) and 0 < level < 100):
            raise ValueError(f"level {part.strip()} is outside (0, 100); levels are percentages")
        if level in levels:
            raise ValueError(f"level {level:g} is listed twice")
        levels.append(level)
    if len(levels) > MAX_LEVELS:
        raise ValueError(f"{len(levels)} levels; at most {MAX_LEVELS}")
    return tuple(sorted(levels))


class RetrainSettings(BaseSettings):
    """Every RETRAIN_* variable (and MLFLOW_TRACKING_URI), typed, bounded and described.

    Grouped by area in the order docs/configuration.md lists them. Built from the environment
    whenever it is asked for (`current_settings()`), never held from import time.
    """

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, allow_inf_nan=False, frozen=True, validate_default=False
    )

    # Where things are and which servers the platform talks to.
    home: str = Field(
        ".retrain", description="everything a local run writes; deleting it is a full reset"
    )
    pg_url: str | None = unset(
        "the embedded server under `$RETRAIN_HOME/pg`",
        "an existing PostgreSQL server to use instead of the embedded one",
    )
    db_prefix: str = Field("retrain_", description="prefix of the databases created on that server")
    landing_url: str | None = unset(
        "`$RETRAIN_HOME/landing`",
        "landing zone (folder or object-storage URL); set, `up` lands no demo tenants",
    )
    storage_url: str | None = unset(
        "`$RETRAIN_HOME/storage`",
        "where asset partitions are stored as Parquet (folder or object-storage URL)",
    )
    ready_timeout_seconds: float = Field(
        120.0,
        gt=0,
        description="how long `up` waits for each process it starts to answer (a loaded host "
        "may need more)",
    )
    webserver_port: int = Field(
        3000,
        ge=1,
        le=65_535,
        description="port of the Dagster UI and GraphQL API that `up` starts (on 127.0.0.1)",
    )
    dagster_pg_url: str | None = unset(
        "`<prefix>dagster` on the server",
        "Dagster instance storage (dagster.yaml reads it); `up` sets it for its processes",
    )
    dagster_artifacts_dir: str | None = unset(
        "`$RETRAIN_HOME/dagster_artifacts`",
        "Dagster's local artifact storage (dagster.yaml reads it); `up` sets it for its processes",
    )
    dagster_compute_logs_dir: str | None = unset(
        "`$RETRAIN_HOME/logs/compute`",
        "Dagster's compute logs (dagster.yaml reads it); `up` sets it for its processes",
    )
    run_workers: Literal["spawn", "forkserver"] = Field(
        "spawn",
        description="how the code server starts each Dagster run: `spawn` (Dagster's own: a "
        "fresh interpreter per run) or `forkserver` (a fork of a process with the code location "
        "loaded: less CPU per run, but the first run waits for that load; run_workers.py)",
    )
    app_pg_url: str | None = unset(
        "`<prefix>app` on the server", "the project's own tables; `up` sets it for its processes"
    )

    # The GPU training service.
    gpu_url: str | None = unset(
        "the service `up` starts, `http://127.0.0.1:$RETRAIN_GPU_PORT`",
        "a remote GPU service for the platform to use; set, `up` starts no local one",
    )
    gpu_port: int = Field(
        8765, ge=1, le=65_535, description="port of the GPU service that `up` starts (on 127.0.0.1)"
    )
    gpu_slots: int = Field(
        2,
        ge=1,
        description="jobs the GPU service that `up` starts trains at once (worker processes)",
    )
    gpu_allow_faults: bool = Field(
        False,
        description="the GPU service that `up` starts accepts fault injection (tests only)",
    )
    gpu_token: str | None = unset(
        "under `up` with its local service: a random token shared by its processes; otherwise "
        "`dev-token`, with a warning",
        "bearer token of the GPU service (server and client)",
    )
    gpu_db_url: str | None = unset(
        "the service's own database",
        "the GPU service's database, set by the service for the worker processes it starts "
        "(not a setting of yours)",
    )

    # The sensors' tick intervals (read when the code location is built).
    poll_interval_seconds: int = Field(
        180,
        ge=1,
        description="`gpu_job_poller` tick interval; one POLL_JOB visit per tick (budget 100)",
    )
    policy_interval_seconds: int = Field(300, ge=1, description="`retraining_policy` tick interval")
    serving_report_interval_seconds: int = Field(
        60,
        ge=1,
        description="`serving_report` tick interval: materializes `deployed_model` when a "
        "champion moves and reports each changed `serving_model_fresh` verdict in a "
        "`serving_freshness_job` run it executes itself, in process",
    )

    # Training: the run key, MLflow, retries and the backends.
    code_commit: str | None = unset(
        "`git rev-parse HEAD` of the checkout", "the code commit in the run key"
    )
    mlflow_port: int = Field(
        5000, ge=1, le=65_535, description="port of the MLflow tracking server that `up` starts"
    )
    mlflow_tracking_uri: str | None = Field(
        None,
        validation_alias="MLFLOW_TRACKING_URI",
        description="an MLflow server to use instead; `up` then starts none",
        json_schema_extra={"unset": "`http://127.0.0.1:$RETRAIN_MLFLOW_PORT`"},
    )
    mlflow_artifacts_url: str | None = unset(
        "`$RETRAIN_HOME/mlflow-artifacts`",
        "where the MLflow server `up` starts keeps models and plots (a folder or object storage "
        "such as `s3://bucket/mlflow`; the server needs its credentials)",
    )
    retry_first_seconds: float = Field(
        30.0,
        ge=0,
        description="wait before a training run's first retry (a download, a resubmission, a "
        "candidate run requested again); each later retry waits twice as long, up to the maximum",
    )
    retry_max_seconds: float | None = Field(
        None,
        ge=0,
        description="the longest wait between two retries of a training run's state (at least "
        "RETRAIN_RETRY_FIRST_SECONDS)",
        json_schema_extra={"unset": "`600`, or RETRAIN_RETRY_FIRST_SECONDS when that is longer"},
    )
    retry_jitter: float = Field(
        0.25,
        ge=0,
        lt=1,
        description="each retry's wait is drawn within +/- this fraction of it, so runs that "
        "failed together do not retry together",
    )
    training_backend: Literal["reference", "slurm"] = Field(
        "reference",
        description="where training jobs go: `reference` (the GPU service above) or `slurm` (a "
        "Slurm cluster through slurmrestd; docs/scaling-out.md)",
    )
    slurm_url: str | None = unset(
        "`unix://$RETRAIN_HOME/slurm/slurmrestd.socket` (the cluster `retrain-assets slurm` "
        "starts)",
        "slurmrestd of the Slurm backend: `unix:///path/to/socket` or `http(s)://host:port`",
    )
    slurm_token: str | None = unset(
        "`rest_auth/local`", "an `auth/jwt` token for slurmrestd (`scontrol token`)"
    )
    slurm_user: str | None = unset(
        "none sent",
        "the Slurm user name sent with that token; the poll counts only this user's jobs",
    )
    slurm_partition: str | None = unset(
        "the cluster's default partition", "the partition training jobs queue in"
    )
    slurm_time_limit_minutes: int = Field(
        360, ge=1, description="each training job's Slurm time limit"
    )
    slurm_gres: str | None = unset(
        "no GPU asked", "generic resources each training job asks for, e.g. `gpu:1`"
    )
    slurm_storage: str | None = unset(
        "`$RETRAIN_HOME/slurm/jobs`",
        "a folder every Slurm node shares with the platform: specs, checkpoints, models",
    )
    slurm_python: str | None = unset(
        "the platform's own interpreter",
        "the Python (with retrain_assets installed) the batch jobs run on the nodes",
    )
    slurm_attempt: int = Field(
        1,
        ge=1,
        description="the attempt number the Slurm backend gives each batch job it submits (not "
        "a setting of yours)",
    )
    gpu_outage_limit_seconds: float = Field(
        86_400.0,
        gt=0,
        description="how long a training run waits on an unreachable training service before it "
        "ends FAILED (an outage is recorded once, its ticks do not spend POLL_JOB's visits)",
    )

    # The retraining policy (policy/rule.py; per-customer thresholds: `retrain-assets settings`).
    drift_approval: Literal["person", "auto"] = Field(
        "person",
        description="who approves retraining a customer whose features drifted: `person` (an "
        "alert waits for the `approve_drift_retraining` job) or `auto` (`retraining_policy` "
        "decides a `drift` training at once)",
    )

    # Evidence: how many rows a window needs to be judged (features/evidence.py).
    evidence_min_train_rows: int = Field(
        28,
        ge=1,
        description="rows of the customer a window's training part needs, or `training_job` "
        "refuses it before any GPU job",
    )
    evidence_min_holdout_rows: int = Field(
        7,
        ge=1,
        description="rows of the customer the holdout needs (for the refusal and the gate's "
        '"not enough evidence")',
    )
    evidence_min_holdout_rows_per_store: int = Field(
        1,
        ge=1,
        description="holdout rows each store with training rows needs (not a store that stopped "
        "selling: none in the holdout, its newest row over 7 days older than its customer's)",
    )

    # The gate (`beats_champion`).
    gate_margin: float = Field(
        0.02,
        ge=0,
        lt=1,
        description="how much lower (relative) a candidate's WAPE must be than the champion's "
        "(or seasonal naive's) to pass `beats_champion`; also the `gate_settings` resource's "
        "`margin`",
    )
    gate_rule: Literal["margin", "evidence"] = Field(
        "margin",
        description="which rule decides `beats_champion`: `margin` (RETRAIN_GATE_MARGIN on the "
        "holdout's WAPE) or `evidence` (windows, paired bootstrap interval, store guard; "
        "models/gate_evidence.py); the check's metadata shows both",
    )
    gate_windows: int = Field(
        1,
        ge=1,
        le=52,
        description="rolling-origin windows of the holdout the evidence gate judges (the "
        'export\'s holdout must cover them all, else "not enough evidence")',
    )
    gate_window_days: int = Field(
        7, ge=1, le=90, description="days in each of the evidence gate's windows"
    )
    gate_confidence: float = Field(
        0.90,
        ge=0.5,
        le=0.999,
        description="confidence of the evidence gate's paired bootstrap interval of the WAPE "
        "change",
    )
    gate_tolerance: float = Field(
        0.02,
        ge=0,
        le=1,
        description="the evidence gate passes a better candidate whose interval's upper bound of "
        "the relative WAPE change is at most this",
    )
    gate_store_tolerance: float = Field(
        0.10,
        ge=0,
        le=10,
        description="a store whose WAPE the candidate raises by more than this (relative) "
        "counts as worse",
    )
    gate_max_worse_stores: float = Field(
        0.5,
        ge=0,
        le=1,
        description="the share of stores that may be worse before the evidence gate's store "
        "guard fails",
    )
    gate_resamples: int = Field(
        2000, ge=100, le=100_000, description="bootstrap resamples of the evidence gate"
    )
    gate_half_life: float = Field(
        1.0,
        ge=0,
        le=52,
        description="the evidence gate weighs its windows by recency: a window's weight halves "
        "every this many windows back from the newest (`0`: every window weighs the same)",
    )

    # Prediction intervals (prediction_intervals.py).
    interval_levels: Annotated[tuple[float, ...], NoDecode] = Field(
        (80.0, 95.0),
        description="prediction-interval levels the trainer computes and the prediction service "
        "answers (`lower_80`, `upper_80`, ...); empty or `none`: no intervals "
        "(prediction_intervals.py)",
        json_schema_extra={
            "rule": f"up to {MAX_LEVELS} distinct percentages in (0, 100), comma-separated, or none"
        },
    )
    interval_windows: int = Field(
        3, ge=2, le=12, description="rolling-origin refits whose errors give the intervals' widths"
    )
    interval_window_days: int = Field(
        7, ge=1, le=28, description="days each rolling-origin refit forecasts"
    )
    interval_scale: IntervalScale = Field(
        "linear",
        description="what a half-width multiplies per row: `linear` (forecast + 1: each series "
        "its own width, normalized split conformal), `sqrt` (its square root) or `absolute` "
        "(one width for every row); chosen on the tuning scenarios (BENCHMARKS.md)",
    )
    interval_coverage_tolerance: float = Field(
        0.10,
        ge=0,
        lt=1,
        description="how far below its level a candidate's interval may cover the holdout's "
        "actuals before `beats_champion` fails it (0.10: an 80 % interval must cover at least "
        "70 %)",
    )

    # The landing automation.
    landing_interval_seconds: int = Field(
        60, ge=1, description="how often `landing_arrivals` looks at the landing zone"
    )
    landing_settle_seconds: int = Field(
        30,
        ge=0,
        description="how long a day's newest file must be unchanged before the day is read",
    )
    day_cutoff_hours: int = Field(
        12,
        ge=0,
        description="how long after a day ends (UTC) it waits for active customers that have "
        "not delivered",
    )
    landing_automation: bool = Field(
        True,
        description="`off`: `landing_arrivals` requests nothing and says so (days are published "
        "by hand)",
    )

    # The prediction service.
    serve_port: int = Field(
        8080,
        ge=1,
        le=65_535,
        description="port of the prediction service that `up` starts (on 127.0.0.1); `serve "
        "--port` overrides it",
    )
    serve_url: str | None = unset(
        "`http://127.0.0.1:$RETRAIN_SERVE_PORT`",
        "where clients reach the prediction service; `up` sets it for its processes",
    )
    serve_token: str | None = unset(
        "under `up`: a random token per start, shared by its processes; otherwise `dev-token`, "
        "with a warning",
        "bearer token of the prediction service (server and clients)",
    )
    serve_max_models: int = Field(
        32,
        ge=1,
        description="models the prediction service keeps in memory, one per (customer, "
        "version); the least recently used goes",
    )
    serve_max_rows: int = Field(10_000, ge=1, description="rows one request may carry (more: 413)")
    serve_max_history_mb: float = Field(
        512.0,
        gt=0,
        description="memory for the customers' feature tables the prediction service computes "
        "requests by key from; past it the least recently asked customer's is dropped and rebuilt",
    )
    serve_refresh_seconds: float = Field(
        2.0,
        gt=0,
        description="how often the prediction service reads `serving_routes` (route moves) and "
        "`feature_snapshots` (a newly published day, for requests by key)",
    )

    # The rollout (deployment/rollout_settings.py).
    rollout_interval_seconds: int = Field(
        60, ge=1, le=86_400, description='`rollout_controller` tick interval (one "interval")'
    )
    rollout_steps: Annotated[tuple[float, ...], NoDecode] = Field(
        (0.10, 0.50),
        description="canary weights; the states are named `CANARY_<percent>` (change only with "
        "no rollout in progress)",
        json_schema_extra={
            "rule": "comma-separated fractions, each in [0.01, 0.99], increasing, no two of the "
            "same percent"
        },
    )
    rollout_step_seconds: int = Field(
        1800,
        ge=0,
        le=30 * 86_400,
        description="minimum time of a canary step before it is analysed",
    )
    rollout_min_predictions: int = Field(
        100, ge=1, le=10_000_000, description="canary predictions a step needs"
    )
    rollout_min_actuals: int = Field(
        50,
        ge=1,
        le=10_000_000,
        description="canary-routed rows with materialized actual sales a step needs",
    )
    rollout_max_error_rate: float = Field(
        0.01, ge=0, le=1, description="largest share of failed canary predictions in a step"
    )
    rollout_max_nonfinite: int = Field(
        0, ge=0, le=10_000_000, description="most NaN/inf canary predictions in a step"
    )
    rollout_wape_tolerance: float = Field(
        0.05,
        ge=0,
        le=10,
        description="how much worse (relative) the canary's WAPE may be than the champion's on "
        "the same rows",
    )
    rollout_max_no_data_intervals: int = Field(
        2880,
        ge=1,
        le=1_000_000,
        description="analyses without enough data before a step fails (2880 x 60 s = 48 h: "
        "next-day forecasts' sales land a day later)",
    )
    canary_rule: Literal["wape", "evidence"] = Field(
        "wape",
        description="which rule judges a canary step's forecast quality: `wape` (the canary's "
        "WAPE within RETRAIN_ROLLOUT_WAPE_TOLERANCE of the champion's on "
        "RETRAIN_ROLLOUT_MIN_ACTUALS rows) or `evidence` (a paired bootstrap interval of the WAPE "
        "change on the rows the customer's volume says a step needs; inconclusive extends the "
        "step; deployment/canary_evidence.py)",
    )
    canary_confidence: float = Field(
        0.90,
        ge=0.5,
        le=0.999,
        description="confidence of the canary evidence rule's paired bootstrap interval",
    )
    canary_min_rows: int = Field(
        50,
        ge=1,
        le=10_000_000,
        description="rows with actuals a canary step needs at least under the evidence rule",
    )
    canary_min_days: float = Field(
        1.0,
        ge=0,
        le=365,
        description="days of the customer's canary traffic (rows with actuals a day x the "
        "step's share) a step's rows must cover under the evidence rule, beside "
        "RETRAIN_CANARY_MIN_ROWS",
    )
    canary_inconclusive_limit: int = Field(
        3,
        ge=0,
        le=1000,
        description="inconclusive analyses of a step, each extending it by "
        "RETRAIN_ROLLOUT_STEP_SECONDS, before RETRAIN_CANARY_FINAL_RULE decides",
    )
    canary_final_rule: Literal["point", "rollback"] = Field(
        "point",
        description="what decides a step still inconclusive after the limit: `point` (the WAPE "
        "change's point estimate within RETRAIN_ROLLOUT_WAPE_TOLERANCE passes, else it fails) or "
        "`rollback`",
    )
    deploy_check_days: int = Field(
        7, ge=1, le=365, description="newest days with actual sales the deploy-time check scores on"
    )
    deploy_gate_margin: float = Field(
        0.0,
        ge=0,
        le=0.99,
        description="how much lower (relative) the challenger's WAPE must be at the deploy-time "
        "check",
    )
    deploy_pass_max_age_hours: float = Field(
        24.0,
        ge=0,
        le=8760,
        description="how old a deploy-time pass may be for `deployment_decision` run alone",
    )

    # The live demo.
    demo_day_seconds: float = Field(
        20.0, ge=0, description="seconds between the demo clock's days; `0`: no clock"
    )
    demo_scenario_seed: int | None = Field(
        None,
        ge=0,
        description="the live demo's tenants and their events drawn from this seed "
        "(`demo/scenarios.py`) instead of the three demo tenants; set it before the first `up` "
        "or `simulate` lands them",
        json_schema_extra={"unset": "the three demo tenants of `demo/tenants.py`"},
    )

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, values: Any) -> Any:
        """Treat a variable set to blanks as unset, as `VAR= command` means; trim the others."""
        if not isinstance(values, dict):
            return values
        kept: dict[str, Any] = {}
        for name, value in values.items():
            if isinstance(value, str):
                value = value.strip()
                if not value and name not in EMPTY_IS_A_VALUE:
                    continue
                if name in _FOLDED:
                    value = value.lower()
            kept[name] = value
        return kept

    @field_validator("interval_levels", mode="before")
    @classmethod
    def _levels(cls, value: Any) -> Any:
        return parse_levels(value) if isinstance(value, str) else value

    @field_validator("rollout_steps", mode="before")
    @classmethod
    def _steps(cls, value: Any) -> Any:
        return parse_fractions(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _retry_ceiling(self) -> RetrainSettings:
        """Refuse a retry ceiling below the first wait (the waits double from first to max)."""
        if self.retry_max_seconds is not None and self.retry_max_seconds < self.retry_first_seconds:
            raise ValueError(
                f"RETRAIN_RETRY_MAX_SECONDS={self.retry_max_seconds:g}: must be >= "
                f"RETRAIN_RETRY_FIRST_SECONDS ({self.retry_first_seconds:g})"
            )
        return self


FIELDS: dict[str, FieldInfo] = RetrainSettings.model_fields


def env_name(field: str) -> str:
    """Return the variable that sets `field`: RETRAIN_<FIELD>, or the field's own alias."""
    alias = FIELDS[field].validation_alias
    return alias if isinstance(alias, str) else PREFIX + field.upper()
