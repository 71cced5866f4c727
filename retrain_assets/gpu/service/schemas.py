"""The service's request and response bodies: one validated shape per wire message.

Every model forbids unknown fields, so a misspelt parameter is a 422 naming it instead of a
silently ignored default, and the canonical JSON of a spec is exactly what the caller meant.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from retrain_assets.customer_names import (
    CUSTOMER_NAME_RULE,
    MAX_CUSTOMER_NAME,
    is_safe_customer_name,
)

IDEMPOTENCY_KEY_PATTERN = r"^[A-Za-z0-9._-]+$"
JOB_ID_PATTERN = r"^[A-Za-z0-9._-]+$"  # ours are 32 hex digits; any other id is simply unknown
MAX_JOB_ID = 64
MAX_STATUS_IDS = 500
MAX_FEATURES = 500
MAX_COLUMN_NAME = 200
MAX_DATASET_URL = 4096
MAX_ROUNDS = 5000
MAX_INT32 = 2**31 - 1
JobStatusName = Literal["queued", "running", "succeeded", "failed", "cancelled"]
Objective = Literal["poisson", "regression", "regression_l1", "huber", "tweedie", "gamma"]
# Column names and URLs: printable, no control character (Postgres refuses NUL in text).
PRINTABLE_PATTERN = r"^[^\x00-\x1f\x7f]+$"
ColumnName = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_COLUMN_NAME, pattern=PRINTABLE_PATTERN)
]
JobId = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_JOB_ID, pattern=JOB_ID_PATTERN)
]


class _Strict(BaseModel):
    # NaN and Infinity are not numbers a job can use (and not JSON): refused, never stored.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class TrainingParams(_Strict):
    """LightGBM settings a job may choose; everything else is fixed for determinism."""

    num_boost_round: int = Field(200, ge=1, le=MAX_ROUNDS)
    learning_rate: float = Field(0.05, gt=0, le=1)
    num_leaves: int = Field(31, ge=2, le=4096)
    min_data_in_leaf: int = Field(20, ge=1, le=MAX_INT32)
    objective: Objective = "poisson"
    seed: int = Field(7, ge=0, le=MAX_INT32)


class Faults(_Strict):
    """Failures to inject, for tests of the platform's retry and resume paths."""

    fail_at_round: int | None = Field(None, ge=1, le=MAX_ROUNDS)
    crash_at_round: int | None = Field(None, ge=1, le=MAX_ROUNDS)
    slow_seconds_per_round: float | None = Field(None, ge=0, le=10)
    on_attempts: list[Annotated[int, Field(ge=1, le=1000)]] = Field(
        default_factory=lambda: [1], max_length=100
    )


class IntervalSpec(_Strict):
    """Prediction intervals to compute after training (prediction_intervals.py's method)."""

    levels: list[Annotated[float, Field(gt=0, lt=100)]] = Field(min_length=1, max_length=5)
    windows: int = Field(2, ge=2, le=12, description="rolling-origin refits (at least 2)")
    window_days: int = Field(7, ge=1, le=28)
    scale: Literal["absolute", "sqrt", "linear"] = Field(
        "absolute", description="what a half-width multiplies per row (prediction_intervals.py)"
    )
    date_column: ColumnName = "date"

    @field_validator("levels")
    @classmethod
    def _distinct(cls, levels: list[float]) -> list[float]:
        """Refuse a level listed twice (two fields of one name in every answer)."""
        if len(set(levels)) != len(levels):
            raise ValueError("levels must not repeat")
        return sorted(levels)


class TrainingSpec(_Strict):
    """What to train: which customer, which exported dataset, which columns, which settings."""

    customer: str = Field(
        min_length=1, max_length=MAX_CUSTOMER_NAME, description=CUSTOMER_NAME_RULE
    )
    dataset_url: str = Field(
        min_length=1,
        max_length=MAX_DATASET_URL,
        pattern=PRINTABLE_PATTERN,
        description="a local path or file:// URL (Parquet)",
    )
    label: ColumnName = "units_sold"
    features: list[ColumnName] = Field(min_length=1, max_length=MAX_FEATURES)
    params: TrainingParams = Field(default_factory=TrainingParams)
    checkpoint_every: int = Field(25, ge=1, le=MAX_ROUNDS)
    faults: Faults | None = None
    intervals: IntervalSpec | None = None

    @field_validator("customer")
    @classmethod
    def _safe_customer(cls, customer: str) -> str:
        """Refuse a customer name that is not a safe slug (without echoing it back)."""
        if not is_safe_customer_name(customer):
            raise ValueError(f"not {CUSTOMER_NAME_RULE}")
        return customer

    @model_validator(mode="after")
    def _columns_make_sense(self) -> TrainingSpec:
        """Reject duplicate features and a label used as a feature before any worker runs."""
        if len(set(self.features)) != len(self.features):
            raise ValueError("features must not repeat a column")
        if self.label in self.features:
            raise ValueError("the label must not also be a feature")
        return self

    def canonical_json(self) -> str:
        """Return the spec with defaults filled in, as sorted compact JSON.

        Idempotency compares this, so omitted params and spelled-out defaults are one spec.
        """
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


class SubmitRequest(_Strict):
    """Body of `POST /jobs`."""

    idempotency_key: str = Field(min_length=1, max_length=128, pattern=IDEMPOTENCY_KEY_PATTERN)
    spec: TrainingSpec


class StatusRequest(_Strict):
    """Body of `POST /jobs/status`: the ids one sensor tick asks about."""

    ids: list[JobId] = Field(max_length=MAX_STATUS_IDS)


class RunOut(_Strict):
    """One execution of a job by one worker process.

    An attempt may have several runs when the service restarts under it.
    """

    attempt: int
    started_from_round: int
    worker_pid: int | None
    started_at: dt.datetime
    ended_at: dt.datetime | None
    outcome: str | None
    error: str | None
    exit_code: int | None


class JobOut(_Strict):
    """A job as the API reports it; the first eight fields are `protocol.Job`."""

    id: str
    idempotency_key: str
    status: JobStatusName
    attempt: int
    rounds_done: int
    total_rounds: int
    last_checkpoint_round: int | None
    error: str | None
    customer: str
    cancel_requested: bool
    worker_pid: int | None
    started_from_round: int | None = Field(
        description="where the latest run resumed training (0: from scratch)"
    )
    created_at: dt.datetime
    updated_at: dt.datetime
    runs: list[RunOut]


class StatusResponse(_Strict):
    """Answer to `POST /jobs/status`: the known jobs and the ids nobody knows."""

    jobs: list[JobOut]
    missing: list[str]


class ArtifactOut(_Strict):
    """What `GET /jobs/{id}/artifact` announces about a succeeded job's model file."""

    job_id: str
    sha256: str
    size: int
    metrics: dict[str, Any]
