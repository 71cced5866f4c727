"""The GPU training service's contract: job states, the job record, the client interface.

The platform talks to the service only through `GpuService`; the HTTP client and the unit
tests' fake both implement it, so the training machine never knows which one it drives.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


class JobStatus(enum.StrEnum):
    """Where a remote job is; `succeeded`, `failed` and `cancelled` are final for an attempt."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        """Return True when the attempt will not change any more."""
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


@dataclass(frozen=True)
class Job:
    """One remote training job, as the service reports it."""

    id: str
    idempotency_key: str
    status: JobStatus
    attempt: int
    rounds_done: int
    total_rounds: int
    last_checkpoint_round: int | None
    error: str | None = None
    detail: str | None = None  # the backend's own words for the state (Slurm's state and reason)
    # a queued job that will not run until a person acts (Slurm's hold): why, and what to do
    attention: str | None = None


@dataclass(frozen=True)
class Artifact:
    """A downloaded, sha256-verified model file and the metrics the service reported."""

    job_id: str
    path: Path
    sha256: str
    metrics: dict[str, float] = field(default_factory=dict)


class ArtifactCorrupt(Exception):
    """The downloaded bytes do not match the sha256 the service announced."""


class JobConflict(Exception):
    """The idempotency key is already used by a job with a different spec."""


class GpuService(Protocol):
    """What the platform needs from a GPU training service."""

    def submit(self, idempotency_key: str, spec: dict[str, Any]) -> Job:
        """Create the job for this key, or return the existing one (a failed one is resumed)."""
        ...

    def find(self, idempotency_key: str) -> Job | None:
        """Return the job for this key, if one exists."""
        ...

    def get(self, job_id: str) -> Job:
        """Return one job."""
        ...

    def statuses(self, job_ids: list[str]) -> dict[str, Job]:
        """Return many jobs in as few calls as the service allows (unknown ids are left out)."""
        ...

    def cancel(self, job_id: str) -> Job:
        """Ask the service to stop a job."""
        ...

    def download(self, job_id: str, destination: Path) -> Artifact:
        """Download a succeeded job's model into `destination` and verify its sha256."""
        ...
