"""In-test stand-ins for the GPU service and the candidate store (no network, no files kept).

`FakeGpu` is the one fake of `gpu.protocol.GpuService`. It keeps the real service's promises
(same key and spec: same job; same key, other spec: JobConflict; a failed or cancelled job
resubmitted: attempt+1, resuming from its checkpoint; an unknown job: 404; a download checks
the sha256) but nothing trains: a test moves jobs along with `set_status`, `advance` and
`finish`, and can `corrupt` an artifact, take the service `down` or make downloads fail.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from retrain_assets.gpu.client import MODEL_FILE, GpuServiceError
from retrain_assets.gpu.protocol import Artifact, ArtifactCorrupt, Job, JobConflict, JobStatus
from retrain_assets.gpu.service.schemas import TrainingSpec

UNVALIDATED_ROUNDS = 10  # a job's rounds when its spec is not validated and names none


@dataclasses.dataclass
class _Artifact:
    model: bytes
    metrics: dict[str, float]
    served: bytes | None = None  # what download hands out; differs from `model` once corrupted


class FakeGpu:
    """An in-memory GpuService whose jobs live in `jobs` (share it to simulate a new client).

    `validate_specs`: refuse (422) a spec the real service would refuse, as it canonicalises
    them; off by default for tests whose specs are placeholders. `down` makes every call raise
    ConnectionError; `download_errors` are raised by the next downloads, in order; `calls`
    counts protocol calls per method on this client only.
    """

    def __init__(self, jobs: dict[str, Job] | None = None, validate_specs: bool = False) -> None:
        self.jobs: dict[str, Job] = jobs if jobs is not None else {}
        self.validate_specs = validate_specs
        self.calls: Counter[str] = Counter()
        self.down = False
        self.download_errors: list[Exception] = []
        self._specs: dict[str, str] = {}  # job id -> canonical spec (jobs added by hand: none)
        self._artifacts: dict[str, _Artifact] = {}

    # --- protocol ------------------------------------------------------------------------

    def submit(self, idempotency_key: str, spec: dict[str, Any]) -> Job:
        """Create the job for this key, or return the existing one (a failed one is resumed)."""
        self._call("submit")
        canonical, total_rounds = self._canonical(spec)
        job = self.find_quietly(idempotency_key)
        if job is None:
            job = self.add_job(idempotency_key, JobStatus.QUEUED, total_rounds=total_rounds)
            self._specs[job.id] = canonical
            return job
        if self._specs.setdefault(job.id, canonical) != canonical:
            raise JobConflict(
                f"idempotency key {idempotency_key!r} is already used by job {job.id}"
                " with a different spec"
            )
        if job.status in (JobStatus.FAILED, JobStatus.CANCELLED):
            job = dataclasses.replace(
                job,
                status=JobStatus.QUEUED,
                attempt=job.attempt + 1,
                rounds_done=job.last_checkpoint_round or 0,
                error=None,
            )
            self.jobs[job.id] = job
        return job

    def find(self, idempotency_key: str) -> Job | None:
        """Return the job for this key, if one exists."""
        self._call("find")
        return self.find_quietly(idempotency_key)

    def get(self, job_id: str) -> Job:
        """Return one job (GpuServiceError 404 when unknown, like the HTTP client)."""
        self._call("get")
        return self._job(job_id)

    def statuses(self, job_ids: list[str]) -> dict[str, Job]:
        """Return the known jobs among `job_ids` (unknown ids are left out)."""
        self._call("statuses")
        return {i: self.jobs[i] for i in job_ids if i in self.jobs}

    def cancel(self, job_id: str) -> Job:
        """Cancel a queued or running job at once; a finished job is returned unchanged.

        (The real service stops a running job at its next round, so it is `running` a while.)
        """
        self._call("cancel")
        job = self._job(job_id)
        return job if job.status.finished else self.set_status(job_id, JobStatus.CANCELLED)

    def download(self, job_id: str, destination: Path) -> Artifact:
        """Write a succeeded job's model to `destination/model.txt` after checking its sha256."""
        self._call("download")
        if self.download_errors:
            raise self.download_errors.pop(0)
        if self._job(job_id).status is not JobStatus.SUCCEEDED:
            raise GpuServiceError(
                "GET", f"/jobs/{job_id}/artifact", 409, f"job {job_id} has not succeeded"
            )
        stored = self._artifacts.get(job_id) or _Artifact(job_id.encode(), {"mape": 0.1})
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
        return Artifact(job_id, path, actual, dict(stored.metrics))

    # --- test controls -------------------------------------------------------------------

    def add_job(
        self,
        key: str,
        status: JobStatus,
        error: str | None = None,
        total_rounds: int = UNVALIDATED_ROUNDS,
    ) -> Job:
        """Create a job for `key` directly, as if submitted earlier (by another client)."""
        job = Job(f"job-{len(self.jobs) + 1}", key, status, 1, 0, total_rounds, None, error)
        self.jobs[job.id] = job
        return job

    def set_status(self, job_id: str, status: JobStatus, error: str | None = None) -> Job:
        """Give a job a new status; a succeeded one has done all its rounds."""
        job = self._job(job_id)
        done = job.total_rounds if status is JobStatus.SUCCEEDED else job.rounds_done
        job = dataclasses.replace(job, status=status, error=error, rounds_done=done)
        self.jobs[job_id] = job
        return job

    def advance(
        self,
        job_id: str,
        status: JobStatus = JobStatus.RUNNING,
        rounds_done: int | None = None,
        last_checkpoint_round: int | None = None,
        error: str | None = None,
    ) -> Job:
        """Move a job as the service would: a new status, progress, checkpoint or error."""
        changes: dict[str, Any] = {"status": JobStatus(status), "error": error}
        if rounds_done is not None:
            changes["rounds_done"] = rounds_done
        if last_checkpoint_round is not None:
            changes["last_checkpoint_round"] = last_checkpoint_round
        self.jobs[job_id] = dataclasses.replace(self._job(job_id), **changes)
        return self.jobs[job_id]

    def finish(
        self,
        job_id: str,
        model_bytes: bytes = b"fake model\n",
        metrics: dict[str, float] | None = None,
    ) -> Job:
        """Make a job succeed with this model file and these metrics."""
        self._artifacts[job_id] = _Artifact(model_bytes, dict(metrics or {}))
        total = self._job(job_id).total_rounds
        return self.advance(
            job_id, JobStatus.SUCCEEDED, rounds_done=total, last_checkpoint_round=total
        )

    def corrupt(self, job_id: str) -> None:
        """Make the next downloads of a finished job's model differ from its announced hash."""
        stored = self._artifacts.get(job_id)
        if stored is None:
            raise ValueError(f"job {job_id} has no model to corrupt; finish it first")
        stored.served = stored.model + b"tampered"

    def find_quietly(self, key: str) -> Job | None:
        """Return the job for `key` without counting a call."""
        return next((j for j in self.jobs.values() if j.idempotency_key == key), None)

    def _call(self, method: str) -> None:
        self.calls[method] += 1
        if self.down:
            raise ConnectionError("gpu service unreachable (503)")

    def _job(self, job_id: str) -> Job:
        if job_id not in self.jobs:
            raise GpuServiceError("GET", f"/jobs/{job_id}", 404, f"no job {job_id}")
        return self.jobs[job_id]

    def _canonical(self, spec: dict[str, Any]) -> tuple[str, int]:
        if not self.validate_specs:
            params = spec.get("params") or {}
            rounds = int(params.get("num_boost_round", UNVALIDATED_ROUNDS))
            return json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str), rounds
        try:
            model = TrainingSpec.model_validate(spec)
        except ValidationError as error:
            raise GpuServiceError("POST", "/jobs", 422, str(error)) from error
        return model.canonical_json(), model.params.num_boost_round


class MemoryCandidates:
    """A CandidateStore in a dict."""

    def __init__(self) -> None:
        self.saved: dict[tuple[str, str], Artifact] = {}

    def has_candidate(self, customer: str, run_key: str) -> bool:
        return (customer, run_key) in self.saved

    def save_candidate(self, customer: str, run_key: str, artifact: Artifact) -> None:
        self.saved[(customer, run_key)] = artifact
