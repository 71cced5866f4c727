"""`FakeGpuService`: the GPU service in memory, for the platform's unit tests.

It keeps the real service's promises (same key and spec: same job; same key, other spec:
JobConflict; a failed or cancelled job resubmitted: attempt+1, resuming from its checkpoint)
but nothing trains: a test moves jobs along with `advance` and `finish`, and can `corrupt` an
artifact to exercise the sha256 check. Specs are validated and canonicalised like the real
service does, so a spec the fake accepts is one the service accepts too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from retrain_assets.gpu.client import MODEL_FILE, GpuServiceError
from retrain_assets.gpu.protocol import Artifact, ArtifactCorrupt, Job, JobConflict, JobStatus
from retrain_assets.gpu.service.schemas import TrainingSpec


@dataclasses.dataclass
class _Stored:
    job: Job
    canonical: str
    model: bytes | None = None
    served: bytes | None = None  # what download hands out; differs from `model` once corrupted
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)


class FakeGpuService:
    """An in-memory `protocol.GpuService`; `calls` records every protocol call, in order."""

    def __init__(self, validate_specs: bool = True) -> None:
        self.validate_specs = validate_specs
        self.calls: list[tuple[str, Any]] = []
        self._jobs: dict[str, _Stored] = {}
        self._by_key: dict[str, str] = {}

    # --- protocol ------------------------------------------------------------------------

    def submit(self, idempotency_key: str, spec: dict[str, Any]) -> Job:
        """Create the job for this key, or return the existing one (a failed one is resumed)."""
        self.calls.append(("submit", idempotency_key))
        canonical, total_rounds = self._canonical(spec)
        job_id = self._by_key.get(idempotency_key)
        if job_id is None:
            job_id = f"fake-{len(self._jobs) + 1:04d}"
            job = Job(job_id, idempotency_key, JobStatus.QUEUED, 1, 0, total_rounds, None)
            self._jobs[job_id] = _Stored(job, canonical)
            self._by_key[idempotency_key] = job_id
            return job
        stored = self._jobs[job_id]
        if stored.canonical != canonical:
            raise JobConflict(
                f"idempotency key {idempotency_key!r} is already used by job {job_id}"
                " with a different spec"
            )
        if stored.job.status in (JobStatus.FAILED, JobStatus.CANCELLED):
            stored.job = dataclasses.replace(
                stored.job,
                status=JobStatus.QUEUED,
                attempt=stored.job.attempt + 1,
                rounds_done=stored.job.last_checkpoint_round or 0,
                error=None,
            )
        return stored.job

    def find(self, idempotency_key: str) -> Job | None:
        """Return the job for this key, if one exists."""
        self.calls.append(("find", idempotency_key))
        job_id = self._by_key.get(idempotency_key)
        return self._jobs[job_id].job if job_id else None

    def get(self, job_id: str) -> Job:
        """Return one job (GpuServiceError 404 when unknown, like the HTTP client)."""
        self.calls.append(("get", job_id))
        return self._stored(job_id).job

    def statuses(self, job_ids: list[str]) -> dict[str, Job]:
        """Return the known jobs among `job_ids` (unknown ids are left out)."""
        self.calls.append(("statuses", list(job_ids)))
        return {i: self._jobs[i].job for i in job_ids if i in self._jobs}

    def cancel(self, job_id: str) -> Job:
        """Cancel a queued or running job at once; a finished job is returned unchanged.

        (The real service stops a running job at its next round, so it is `running` a while.)
        """
        self.calls.append(("cancel", job_id))
        stored = self._stored(job_id)
        if not stored.job.status.finished:
            stored.job = dataclasses.replace(stored.job, status=JobStatus.CANCELLED)
        return stored.job

    def download(self, job_id: str, destination: Path) -> Artifact:
        """Write a succeeded job's model to `destination/model.txt` after checking its sha256."""
        self.calls.append(("download", job_id))
        stored = self._stored(job_id)
        if stored.job.status != JobStatus.SUCCEEDED or stored.model is None:
            raise GpuServiceError(
                "GET", f"/jobs/{job_id}/artifact", 409, f"job {job_id} has not succeeded"
            )
        announced = hashlib.sha256(stored.model).hexdigest()
        served = stored.served if stored.served is not None else stored.model
        actual = hashlib.sha256(served).hexdigest()
        if actual != announced:
            raise ArtifactCorrupt(
                f"model of job {job_id}: service announced sha256 {announced}, "
                f"downloaded bytes hash to {actual}"
            )
        destination.mkdir(parents=True, exist_ok=True)
        path = destination / MODEL_FILE
        path.write_bytes(served)
        return Artifact(job_id=job_id, path=path, sha256=actual, metrics=dict(stored.metrics))

    # --- test controls -------------------------------------------------------------------

    def advance(
        self,
        job_id: str,
        status: JobStatus = JobStatus.RUNNING,
        rounds_done: int | None = None,
        last_checkpoint_round: int | None = None,
        error: str | None = None,
    ) -> Job:
        """Move a job as the service would: a new status, progress, checkpoint or error."""
        stored = self._stored(job_id)
        changes: dict[str, Any] = {"status": JobStatus(status), "error": error}
        if rounds_done is not None:
            changes["rounds_done"] = rounds_done
        if last_checkpoint_round is not None:
            changes["last_checkpoint_round"] = last_checkpoint_round
        stored.job = dataclasses.replace(stored.job, **changes)
        return stored.job

    def finish(
        self,
        job_id: str,
        model_bytes: bytes = b"fake model\n",
        metrics: dict[str, float] | None = None,
    ) -> Job:
        """Make a job succeed with this model file and these metrics."""
        stored = self._stored(job_id)
        stored.model = model_bytes
        stored.served = None
        stored.metrics = dict(metrics or {})
        total = stored.job.total_rounds
        stored.job = dataclasses.replace(
            stored.job,
            status=JobStatus.SUCCEEDED,
            rounds_done=total,
            last_checkpoint_round=total,
            error=None,
        )
        return stored.job

    def corrupt(self, job_id: str) -> None:
        """Make the next downloads of a succeeded job's model differ from its announced hash."""
        stored = self._stored(job_id)
        if stored.model is None:
            raise ValueError(f"job {job_id} has no model to corrupt; finish it first")
        stored.served = stored.model + b"tampered"

    def _stored(self, job_id: str) -> _Stored:
        if job_id not in self._jobs:
            raise GpuServiceError("GET", f"/jobs/{job_id}", 404, f"no job {job_id}")
        return self._jobs[job_id]

    def _canonical(self, spec: dict[str, Any]) -> tuple[str, int]:
        if not self.validate_specs:
            params = spec.get("params") or {}
            rounds = int(params.get("num_boost_round", 200))
            return json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str), rounds
        try:
            model = TrainingSpec.model_validate(spec)
        except ValidationError as error:
            raise GpuServiceError("POST", "/jobs", 422, str(error)) from error
        return model.canonical_json(), model.params.num_boost_round
