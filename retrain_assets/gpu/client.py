"""`HttpGpuService`: the platform's client of the GPU training service's HTTP API.

Calls that are safe to repeat (reads, and submit and cancel, which are idempotent by key and
by state) are retried a couple of times on connection errors, timeouts and a 503 (the
service's database is briefly away), so one dropped connection or a Postgres restart under
the service does not fail a sensor tick. Any other failure is a `GpuServiceError` carrying the
status code and the service's answer.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from retrain_assets.gpu.protocol import Artifact, ArtifactCorrupt, Job, JobConflict, JobStatus

STATUS_BATCH = 500  # the service's limit of ids per `POST /jobs/status`
UNAVAILABLE = 503  # the service is up but its database is not: try again shortly
MODEL_FILE = "model.txt"
_CHUNK = 1 << 20


class GpuServiceError(Exception):
    """The service answered with an unexpected status (or not at all)."""

    def __init__(self, method: str, path: str, status: int | None, body: str) -> None:
        self.status = status
        self.body = body
        super().__init__(f"GPU service {method} {path} -> {status}: {body[:2000]}")


def job_from_json(data: dict[str, Any]) -> Job:
    """Map a job as the API returns it onto `protocol.Job` (extra progress fields dropped)."""
    return Job(
        id=data["id"],
        idempotency_key=data["idempotency_key"],
        status=JobStatus(data["status"]),
        attempt=int(data["attempt"]),
        rounds_done=int(data["rounds_done"]),
        total_rounds=int(data["total_rounds"]),
        last_checkpoint_round=data.get("last_checkpoint_round"),
        error=data.get("error"),
    )


class HttpGpuService:
    """`protocol.GpuService` over HTTP, with a bearer token."""

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = 30.0,
        retries: int = 2,
        retry_delay: float = 0.5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.retry_delay = retry_delay
        self._session = requests.Session()
        self._session.headers["Authorization"] = f"Bearer {token}"

    def close(self) -> None:
        """Close the pooled connections."""
        self._session.close()

    def __enter__(self) -> HttpGpuService:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def submit(self, idempotency_key: str, spec: dict[str, Any]) -> Job:
        """Create the job for this key, or return the existing one (a failed one is resumed).

        Raises JobConflict when the key already names a job with a different spec.
        """
        body = {"idempotency_key": idempotency_key, "spec": spec}
        response = self._request("POST", "/jobs", json=body, expect=(200, 201, 409))
        if response.status_code == 409:
            raise JobConflict(_detail(response))
        return job_from_json(response.json())

    def find(self, idempotency_key: str) -> Job | None:
        """Return the job for this key, if one exists."""
        response = self._request(
            "GET", "/jobs", params={"idempotency_key": idempotency_key}, expect=(200, 404)
        )
        return None if response.status_code == 404 else job_from_json(response.json())

    def get(self, job_id: str) -> Job:
        """Return one job (GpuServiceError with status 404 when unknown)."""
        return job_from_json(self._request("GET", f"/jobs/{job_id}").json())

    def statuses(self, job_ids: list[str]) -> dict[str, Job]:
        """Return many jobs, 500 ids per call; unknown ids are left out."""
        found: dict[str, Job] = {}
        for start in range(0, len(job_ids), STATUS_BATCH):
            batch = job_ids[start : start + STATUS_BATCH]
            response = self._request("POST", "/jobs/status", json={"ids": batch})
            for data in response.json()["jobs"]:
                job = job_from_json(data)
                found[job.id] = job
        return found

    def cancel(self, job_id: str) -> Job:
        """Ask the service to stop a job (a running one stops at its next round)."""
        return job_from_json(self._request("POST", f"/jobs/{job_id}/cancel").json())

    def download(self, job_id: str, destination: Path) -> Artifact:
        """Download a succeeded job's model to `destination/model.txt`, verifying its sha256.

        The bytes are written to a temporary name first and moved in place only once their
        hash matches; on a mismatch nothing is left behind and ArtifactCorrupt names both hashes.
        """
        announced = self._request("GET", f"/jobs/{job_id}/artifact").json()
        destination.mkdir(parents=True, exist_ok=True)
        final = destination / MODEL_FILE
        partial = destination / f".{MODEL_FILE}.partial"
        digest = hashlib.sha256()
        path = f"/jobs/{job_id}/artifact/model"
        response = self._request("GET", path, stream=True)
        try:
            with partial.open("wb") as output:
                for chunk in _content(response, path):
                    digest.update(chunk)
                    output.write(chunk)
        finally:
            response.close()
        actual = digest.hexdigest()
        if actual != announced["sha256"]:
            partial.unlink(missing_ok=True)
            raise ArtifactCorrupt(
                f"model of job {job_id}: service announced sha256 {announced['sha256']}, "
                f"downloaded bytes hash to {actual}"
            )
        partial.replace(final)
        metrics = {name: float(value) for name, value in announced["metrics"].items()}
        return Artifact(job_id=job_id, path=final, sha256=actual, metrics=metrics)

    def _request(
        self,
        method: str,
        path: str,
        expect: tuple[int, ...] = (200,),
        stream: bool = False,
        **kwargs: Any,
    ) -> requests.Response:
        """Send one call; retry connection errors, timeouts and 503s (every call is repeatable).

        Raises GpuServiceError for a status outside `expect` or when every try failed.
        """
        url = self.base_url + path
        for attempt in range(self.retries + 1):
            try:
                response = self._session.request(
                    method, url, timeout=self.timeout, stream=stream, **kwargs
                )
            except (requests.ConnectionError, requests.Timeout) as error:
                if attempt == self.retries:
                    raise GpuServiceError(method, path, None, str(error)) from error
            else:
                if response.status_code != UNAVAILABLE or attempt == self.retries:
                    break
                response.close()
            time.sleep(self.retry_delay * (attempt + 1))
        if response.status_code not in expect:
            raise GpuServiceError(method, path, response.status_code, response.text)
        return response


def _detail(response: requests.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        return response.text
    return detail if isinstance(detail, str) else response.text


def _content(response: requests.Response, path: str) -> Iterator[bytes]:
    try:
        yield from response.iter_content(_CHUNK)
    except requests.RequestException as error:
        broke = f"download broke: {error}"
        raise GpuServiceError("GET", path, response.status_code, broke) from error
