"""The job API: submit (idempotent by key), look up, batch status, cancel, fetch the model.

Every route here sits behind the bearer-token check that `app.create_app` adds to the router.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response
from fastapi import Path as PathParam
from fastapi.responses import FileResponse

from retrain_assets.gpu.service.http_errors import StrictJsonRoute
from retrain_assets.gpu.service.http_guard import MAX_BODY_BYTES
from retrain_assets.gpu.service.job_store import ArtifactRecord, JobStore, KeyConflict
from retrain_assets.gpu.service.scheduler import Scheduler
from retrain_assets.gpu.service.schemas import (
    IDEMPOTENCY_KEY_PATTERN,
    JOB_ID_PATTERN,
    MAX_JOB_ID,
    ArtifactOut,
    JobOut,
    StatusRequest,
    StatusResponse,
    SubmitRequest,
)

FAULTS_DISABLED = "fault injection is disabled on this service"
# A job id in a path: bounded and plain, checked before any query (a NUL would break one).
JobIdPath = Annotated[str, PathParam(min_length=1, max_length=MAX_JOB_ID, pattern=JOB_ID_PATTERN)]


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {}}}


def build_router(store: JobStore, scheduler: Scheduler, allow_faults: bool) -> APIRouter:
    """Return the job routes, bound to this service's store and scheduler."""
    # max_body_size: a body without Content-Length is a 413 as soon as its count passes the
    # limit (RequestGuard, outside, already refused a declared length over it and no token).
    router = APIRouter(tags=["jobs"], route_class=StrictJsonRoute, max_body_size=MAX_BODY_BYTES)

    @router.post(
        "/jobs",
        status_code=201,
        responses={
            200: {"model": JobOut, "description": "the key's existing job (requeued if failed)"},
            409: _error("the key is used by a job with a different spec"),
            413: _error("body over 1 MiB"),
            422: _error("malformed body, or faults sent to a service without --allow-faults"),
        },
    )
    def submit_job(body: SubmitRequest, response: Response) -> JobOut:
        """Create a job, or return the key's existing one; a failed one resumes as attempt+1."""
        if body.spec.faults is not None and not allow_faults:
            raise HTTPException(422, FAULTS_DISABLED)
        try:
            job, created = store.submit(body.idempotency_key, body.spec)
        except KeyConflict as conflict:
            raise HTTPException(409, str(conflict)) from conflict
        if not created:
            response.status_code = 200
        if job.status == "queued":
            scheduler.wake()
        return job

    @router.get("/jobs", responses={404: _error("no job has this key")})
    def find_job(
        idempotency_key: Annotated[
            str, Query(min_length=1, max_length=128, pattern=IDEMPOTENCY_KEY_PATTERN)
        ],
    ) -> JobOut:
        """Return the job for an idempotency key."""
        job = store.find(idempotency_key)
        if job is None:
            raise HTTPException(404, f"no job has idempotency key {idempotency_key!r}")
        return job

    @router.post("/jobs/status")
    def job_statuses(body: StatusRequest) -> StatusResponse:
        """Return up to 500 jobs in one call (a whole sensor tick), and the unknown ids.

        Each id is at most 64 plain characters, so the answer is bounded too.
        """
        jobs = store.many(body.ids)
        known = {job.id for job in jobs}
        return StatusResponse(jobs=jobs, missing=[i for i in body.ids if i not in known])

    @router.get("/jobs/{job_id}", responses={404: _error("unknown job")})
    def get_job(job_id: JobIdPath) -> JobOut:
        """Return one job."""
        return _found(store.get(job_id), job_id)

    @router.post("/jobs/{job_id}/cancel", responses={404: _error("unknown job")})
    def cancel_job(job_id: JobIdPath) -> JobOut:
        """Cancel a queued job at once; a running one stops at its next round."""
        return _found(store.cancel(job_id), job_id)

    @router.get(
        "/jobs/{job_id}/artifact",
        responses={404: _error("unknown job"), 409: _error("the job has not succeeded")},
    )
    def get_artifact(job_id: JobIdPath) -> ArtifactOut:
        """Return the model's sha256, size and metrics (verify the download against them)."""
        record = _succeeded(store.artifact(job_id), job_id)
        if record.sha256 is None or record.size is None:  # the row says succeeded, no artifact
            raise HTTPException(410, f"job {job_id} has no recorded model file")
        return ArtifactOut(
            job_id=job_id, sha256=record.sha256, size=record.size, metrics=record.metrics
        )

    @router.get(
        "/jobs/{job_id}/artifact/model",
        response_class=FileResponse,
        responses={
            200: {"content": {"application/octet-stream": {}}, "description": "the model"},
            404: _error("unknown job"),
            409: _error("the job has not succeeded"),
            410: _error("the model file is gone from the service's disk"),
        },
    )
    def get_model(job_id: JobIdPath) -> FileResponse:
        """Stream the model file (LightGBM text format)."""
        record = _succeeded(store.artifact(job_id), job_id)
        if record.path is None or not Path(record.path).is_file():
            raise HTTPException(410, f"the model file of job {job_id} is missing: {record.path}")
        return FileResponse(
            record.path, media_type="application/octet-stream", filename="model.txt"
        )

    return router


def _found(job: JobOut | None, job_id: str) -> JobOut:
    if job is None:
        raise HTTPException(404, f"no job {job_id}")
    return job


def _succeeded(record: ArtifactRecord | None, job_id: str) -> ArtifactRecord:
    if record is None:
        raise HTTPException(404, f"no job {job_id}")
    if record.status != "succeeded":
        raise HTTPException(409, f"job {job_id} has not succeeded (status {record.status})")
    return record
