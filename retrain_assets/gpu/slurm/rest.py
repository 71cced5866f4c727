"""`SlurmRest`: the few slurmrestd calls the Slurm backend makes (OpenAPI plugin v0.0.38).

slurmrestd answers most failures with a 500 and an `errors` list; only `error_number` tells
"that job does not exist" (2017) from "slurmctld did not answer" (-1). This module turns the
answers into `SlurmRestError`s that say which: `status` is None when the cluster cannot be
asked now (no socket, a timeout, slurmctld down), which the training machine records as an
outage; any other error is an answer and carries the HTTP status and Slurm's own words.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

import httpx

API = "/slurm/v0.0.38"
UNKNOWN_JOB = 2017  # ESLURM_INVALID_JOB_ID: slurmctld does not know the id (purged or never)
CONTROLLER_DOWN = -1  # slurmrestd could not reach slurmctld
_UNREACHABLE_HTTP = (502, 503, 504)


class SlurmRestError(Exception):
    """slurmrestd refused a call, or could not be asked.

    `status` is the HTTP status, None when nothing answered for the cluster (see module doc);
    `error_numbers` are Slurm's numbers from the answer's `errors`.
    """

    def __init__(
        self, call: str, status: int | None, message: str, error_numbers: tuple[int, ...] = ()
    ) -> None:
        self.status = status
        self.error_numbers = error_numbers
        super().__init__(f"slurmrestd {call} -> {status}: {message[:2000]}")


class UnknownJob(SlurmRestError):
    """slurmctld does not know this job id (finished past MinJobAge, or lost in a restart)."""


def transport_for(url: str) -> tuple[httpx.HTTPTransport, str]:
    """Return the transport and base URL for `unix:///path/to.socket` or `http(s)://host:port`.

    Raises:
        ValueError: the URL is neither, saying which forms are accepted.
    """
    parsed = urlparse(url)
    if parsed.scheme == "unix" and parsed.path:
        return httpx.HTTPTransport(uds=parsed.path), "http://slurmrestd"
    if parsed.scheme in {"http", "https"} and parsed.netloc:
        return httpx.HTTPTransport(), url.rstrip("/")
    raise ValueError(f"slurmrestd URL {url!r} is not unix:///path/to/socket or http(s)://host:port")


class SlurmRest:
    """A slurmrestd client; with a token it sends `auth/jwt` headers, else `rest_auth/local`."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        user: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        transport, base = transport_for(url)
        headers = {"Accept": "application/json"}
        if token:
            headers["X-SLURM-USER-TOKEN"] = token
            if user:
                headers["X-SLURM-USER-NAME"] = user
        self.url = url
        self._client = httpx.Client(
            transport=transport, base_url=base, headers=headers, timeout=timeout
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def ping(self) -> dict[str, Any]:
        """Return slurmrestd's ping of slurmctld (raises when the controller is down)."""
        return self._call("GET", "/ping")

    def jobs(self) -> list[dict[str, Any]]:
        """Return every job slurmctld knows, in one call (finished ones until MinJobAge)."""
        return _list(self._call("GET", "/jobs"), "jobs")

    def nodes(self) -> list[dict[str, Any]]:
        """Return every node (asked only when a job looks stuck, to name its drained nodes)."""
        return _list(self._call("GET", "/nodes"), "nodes")

    def job(self, job_id: int) -> dict[str, Any]:
        """Return one job; UnknownJob when slurmctld does not know the id."""
        jobs = _list(self._call("GET", f"/job/{job_id}"), "jobs")
        if len(jobs) != 1:
            raise SlurmRestError(f"GET /job/{job_id}", 200, f"{len(jobs)} jobs in the answer")
        return jobs[0]

    def submit(self, script: str, job: dict[str, Any]) -> int:
        """Submit a batch job; return its id."""
        answer = self._call("POST", "/job/submit", body={"script": script, "job": job})
        job_id = answer.get("job_id")
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            raise SlurmRestError("POST /job/submit", 200, f"no job_id in the answer: {answer}")
        return job_id

    def cancel(self, job_id: int) -> None:
        """Cancel a job (SIGKILL after KillWait); UnknownJob when slurmctld does not know it."""
        self._call("DELETE", f"/job/{job_id}")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        call = f"{method} {path}"
        try:
            response = self._client.request(method, API + path, json=body)
        except httpx.TransportError as error:
            raise SlurmRestError(call, None, f"{type(error).__name__}: {error}") from error
        try:
            answer = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            answer = None
        if not isinstance(answer, dict):
            status = None if response.status_code in _UNREACHABLE_HTTP else response.status_code
            raise SlurmRestError(call, status, f"not a JSON object: {response.text[:500]!r}")
        errors = _list(answer, "errors")
        numbers = tuple(
            number
            for e in errors
            if isinstance(e, dict) and (number := _number(e.get("error_number"))) != 0
        )
        if response.status_code == 200 and not numbers:
            return answer
        message = "; ".join(_describe(e) for e in errors) or response.text[:500]
        if UNKNOWN_JOB in numbers:
            raise UnknownJob(call, response.status_code, message, numbers)
        down = CONTROLLER_DOWN in numbers or response.status_code in _UNREACHABLE_HTTP
        raise SlurmRestError(call, None if down else response.status_code, message, numbers)


def _list(answer: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = answer.get(key, [])
    if not isinstance(value, list):
        raise SlurmRestError(key, 200, f"{key!r} is not a list in the answer")
    return value


def _number(value: Any) -> int:
    """Return Slurm's error number; 0 when there is none.

    An entry without a number is a notice, not an error: a held job's submit answers 200 with
    its id and "Job is in held state, pending scheduler release" in `errors`. On any status but
    200 the call fails whatever the numbers say.
    """
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _describe(error: Any) -> str:
    if not isinstance(error, dict):
        return str(error)
    words = [str(error.get(k)) for k in ("error", "description") if error.get(k)]
    return f"{' / '.join(words) or 'error'} (error_number {error.get('error_number')})"
