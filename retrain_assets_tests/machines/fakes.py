"""In-test stand-ins for the GPU service and the candidate store (no network, no files kept)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from retrain_assets.gpu.protocol import Artifact, Job, JobStatus


class FakeGpu:
    """A GpuService whose remote jobs live in `jobs` (share it to simulate a restarted client).

    `down` makes every call raise; `download_errors` are raised by the next downloads, in order;
    `calls` counts calls per method on this client only.
    """

    def __init__(self, jobs: dict[str, Job] | None = None) -> None:
        self.jobs: dict[str, Job] = jobs if jobs is not None else {}
        self.calls: Counter[str] = Counter()
        self.down = False
        self.download_errors: list[Exception] = []

    def _call(self, method: str) -> None:
        self.calls[method] += 1
        if self.down:
            raise ConnectionError("gpu service unreachable (503)")

    def add_job(self, key: str, status: JobStatus, error: str | None = None) -> Job:
        job = Job(f"job-{len(self.jobs) + 1}", key, status, 1, 0, 10, None, error)
        self.jobs[job.id] = job
        return job

    def set_status(self, job_id: str, status: JobStatus, error: str | None = None) -> Job:
        done = 10 if status is JobStatus.SUCCEEDED else self.jobs[job_id].rounds_done
        job = dataclasses.replace(self.jobs[job_id], status=status, error=error, rounds_done=done)
        self.jobs[job_id] = job
        return job

    def submit(self, idempotency_key: str, spec: dict[str, Any]) -> Job:
        self._call("submit")
        job = self.find_quietly(idempotency_key)
        if job is None:
            return self.add_job(idempotency_key, JobStatus.QUEUED)
        if job.status in (JobStatus.FAILED, JobStatus.CANCELLED):
            job = dataclasses.replace(job, status=JobStatus.QUEUED, attempt=job.attempt + 1)
            self.jobs[job.id] = job
        return job

    def find_quietly(self, key: str) -> Job | None:
        return next((j for j in self.jobs.values() if j.idempotency_key == key), None)

    def find(self, idempotency_key: str) -> Job | None:
        self._call("find")
        return self.find_quietly(idempotency_key)

    def get(self, job_id: str) -> Job:
        self._call("get")
        return self.jobs[job_id]

    def statuses(self, job_ids: list[str]) -> dict[str, Job]:
        self._call("statuses")
        return {i: self.jobs[i] for i in job_ids if i in self.jobs}

    def cancel(self, job_id: str) -> Job:
        self._call("cancel")
        return self.set_status(job_id, JobStatus.CANCELLED)

    def download(self, job_id: str, destination: Path) -> Artifact:
        self._call("download")
        if self.download_errors:
            raise self.download_errors.pop(0)
        if self.jobs[job_id].status is not JobStatus.SUCCEEDED:
            raise RuntimeError(f"job {job_id} has not succeeded")
        destination.mkdir(parents=True, exist_ok=True)
        path = destination / "model.bin"
        path.write_bytes(job_id.encode())
        return Artifact(job_id, path, hashlib.sha256(job_id.encode()).hexdigest(), {"mape": 0.1})


class MemoryCandidates:
    """A CandidateStore in a dict."""

    def __init__(self) -> None:
        self.saved: dict[tuple[str, str], Artifact] = {}

    def has_candidate(self, customer: str, run_key: str) -> bool:
        return (customer, run_key) in self.saved

    def save_candidate(self, customer: str, run_key: str, artifact: Artifact) -> None:
        self.saved[(customer, run_key)] = artifact
