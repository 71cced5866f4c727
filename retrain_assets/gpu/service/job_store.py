"""The API's and the scheduler's reads and writes of the service's job tables.

The API submits, reads and cancels jobs; the scheduler claims, reaps and recovers them. The
worker processes write through their own ledger (`worker_ledger.py`), guarded by the run token
the scheduler hands out here.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.extensions

from retrain_assets.gpu.service.schemas import JobOut, RunOut, TrainingSpec
from retrain_assets.store.database import one_row, transaction
from retrain_assets.store.server import libpq_url

_JOB_COLUMNS = (
    "id, idempotency_key, status, attempt, rounds_done, total_rounds, last_checkpoint_round,"
    " error, customer, cancel_requested, worker_pid, created_at, updated_at"
)
_RUN_COLUMNS = (
    "job_id, attempt, started_from_round, worker_pid, started_at, ended_at, outcome, error,"
    " exit_code"
)
MAX_ERROR_CHARS = 2000  # a job's stored error: the start of the message, then how much was cut
PING_TIMEOUT_SECONDS = 3
log = logging.getLogger(__name__)


def bounded_error(text: str) -> str:
    """Return `text` cut to MAX_ERROR_CHARS, saying how many characters were left out.

    A training error can quote its whole input (a KeyError listing hundreds of missing
    columns); the job row and every status response carry the error, so it is bounded.
    """
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}... ({len(text) - MAX_ERROR_CHARS} more characters cut)"


class KeyConflict(Exception):
    """The idempotency key already names a job whose spec differs."""

    def __init__(self, key: str, job_id: str) -> None:
        super().__init__(
            f"idempotency key {key!r} is already used by job {job_id} with a different spec"
        )


@dataclass(frozen=True)
class Claim:
    """A job the scheduler moved to `running` for one worker run."""

    job_id: str
    run_token: str
    attempt: int
    started_from_round: int


@dataclass(frozen=True)
class RunningJob:
    """A job the database says is running, and the worker that should be running it."""

    job_id: str
    run_token: str | None
    worker_pid: int | None


@dataclass(frozen=True)
class ArtifactRecord:
    """Where a job's model file is and what the service announced about it."""

    status: str
    path: str | None
    sha256: str | None
    size: int | None
    metrics: dict[str, Any]


def _dicts(cur: psycopg2.extensions.cursor) -> list[dict[str, Any]]:
    if cur.description is None:  # a statement without rows: nothing to name
        raise LookupError(f"no result columns from {cur.query!r}")
    names = [column.name for column in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


class JobStore:
    """The API's and the scheduler's view of the job tables (short transactions)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def ping(self) -> str | None:
        """Return None when the database answers `SELECT 1`, else the first line of why not."""
        try:
            conn = psycopg2.connect(libpq_url(self.url), connect_timeout=PING_TIMEOUT_SECONDS)
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT 1")
            finally:
                conn.close()
        except psycopg2.Error as error:
            text = str(error).strip()
            return text.splitlines()[0] if text else type(error).__name__
        return None

    # --- API -----------------------------------------------------------------------------

    def submit(self, key: str, spec: TrainingSpec) -> tuple[JobOut, bool]:
        """Create the job for `key`, or return the existing one; requeue it if it failed.

        Returns the job and whether it was created. Raises KeyConflict when the key is taken
        by a different spec.
        """
        canonical = spec.canonical_json()
        with transaction(self.url) as cur:
            cur.execute(
                "INSERT INTO jobs (id, idempotency_key, spec, spec_canonical, customer, status,"
                " total_rounds) VALUES (%s, %s, %s, %s, %s, 'queued', %s)"
                " ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
                (
                    uuid.uuid4().hex,
                    key,
                    canonical,
                    canonical,
                    spec.customer,
                    spec.params.num_boost_round,
                ),
            )
            inserted = cur.fetchone()
            if inserted is not None:
                return self._load(cur, [inserted[0]])[0], True
            cur.execute(
                "SELECT id, spec_canonical, status FROM jobs WHERE idempotency_key = %s FOR UPDATE",
                (key,),
            )
            job_id, existing, status = one_row(cur)
            if existing != canonical:
                raise KeyConflict(key, job_id)
            if status in ("failed", "cancelled"):
                cur.execute(
                    "UPDATE jobs SET status = 'queued', attempt = attempt + 1, error = NULL,"
                    " cancel_requested = false, worker_pid = NULL,"
                    " rounds_done = coalesce(last_checkpoint_round, 0), queued_at = now(),"
                    " updated_at = now(), finished_at = NULL WHERE id = %s",
                    (job_id,),
                )
            return self._load(cur, [job_id])[0], False

    def get(self, job_id: str) -> JobOut | None:
        """Return one job, or None when the id is unknown."""
        jobs = self.many([job_id])
        return jobs[0] if jobs else None

    def find(self, key: str) -> JobOut | None:
        """Return the job for an idempotency key, or None."""
        with transaction(self.url) as cur:
            cur.execute("SELECT id FROM jobs WHERE idempotency_key = %s", (key,))
            row = cur.fetchone()
            return self._load(cur, [row[0]])[0] if row else None

    def many(self, job_ids: list[str]) -> list[JobOut]:
        """Return the known jobs among `job_ids`, in the order asked, in two queries."""
        with transaction(self.url) as cur:
            return self._load(cur, job_ids)

    def cancel(self, job_id: str) -> JobOut | None:
        """Cancel a queued job now; ask a running one's worker to stop at its next round."""
        with transaction(self.url) as cur:
            cur.execute("SELECT status FROM jobs WHERE id = %s FOR UPDATE", (job_id,))
            row = cur.fetchone()
            if row is None:
                return None
            if row[0] == "queued":
                cur.execute(
                    "UPDATE jobs SET status = 'cancelled', finished_at = now(),"
                    " updated_at = now() WHERE id = %s",
                    (job_id,),
                )
            elif row[0] == "running":
                cur.execute(
                    "UPDATE jobs SET cancel_requested = true, updated_at = now() WHERE id = %s",
                    (job_id,),
                )
            return self._load(cur, [job_id])[0]

    def artifact(self, job_id: str) -> ArtifactRecord | None:
        """Return a job's artifact record (its status too, to refuse unfinished jobs)."""
        with transaction(self.url) as cur:
            cur.execute(
                "SELECT status, artifact_path, artifact_sha256, artifact_size, metrics"
                " FROM jobs WHERE id = %s",
                (job_id,),
            )
            row = cur.fetchone()
        if row is None:
            return None
        status, path, sha256, size, metrics = row
        return ArtifactRecord(status, path, sha256, size, metrics or {})

    @staticmethod
    def _load(cur: psycopg2.extensions.cursor, job_ids: list[str]) -> list[JobOut]:
        cur.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ANY(%s)", (list(job_ids),))
        jobs = {row["id"]: row for row in _dicts(cur)}
        cur.execute(
            f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE job_id = ANY(%s) ORDER BY id",
            (list(jobs),),
        )
        runs: dict[str, list[RunOut]] = {}
        for row in _dicts(cur):
            runs.setdefault(row.pop("job_id"), []).append(RunOut(**row))
        found = []
        for job_id in job_ids:
            if job_id in jobs:
                job_runs = runs.get(job_id, [])
                started = job_runs[-1].started_from_round if job_runs else None
                found.append(JobOut(**jobs[job_id], runs=job_runs, started_from_round=started))
        return found

    # --- scheduler -----------------------------------------------------------------------

    def claim(self) -> Claim | None:
        """Move the oldest queued job to `running` for a new run, or return None.

        `FOR UPDATE SKIP LOCKED` lets a concurrent cancel or another claimer pass over a row
        this transaction holds instead of waiting on it.
        """
        token = uuid.uuid4().hex
        with transaction(self.url) as cur:
            cur.execute(
                "WITH next AS (SELECT id FROM jobs WHERE status = 'queued'"
                " ORDER BY queued_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " UPDATE jobs j SET status = 'running', run_token = %s, worker_pid = NULL,"
                " rounds_done = coalesce(j.last_checkpoint_round, 0), updated_at = now()"
                " FROM next WHERE j.id = next.id RETURNING j.id, j.attempt, j.rounds_done",
                (token,),
            )
            row = cur.fetchone()
            if row is None:
                return None
            job_id, attempt, start = row
            cur.execute(
                "INSERT INTO job_runs (job_id, attempt, run_token, started_from_round)"
                " VALUES (%s, %s, %s, %s)",
                (job_id, attempt, token, start),
            )
        return Claim(job_id, token, attempt, start)

    def set_worker_pid(self, claim: Claim, pid: int) -> None:
        """Record which process runs a claim, so a restarted service can tell if it lives."""
        with transaction(self.url) as cur:
            cur.execute(
                "UPDATE jobs SET worker_pid = %s, updated_at = now()"
                " WHERE id = %s AND run_token = %s",
                (pid, claim.job_id, claim.run_token),
            )
            cur.execute(
                "UPDATE job_runs SET worker_pid = %s WHERE run_token = %s", (pid, claim.run_token)
            )

    def fail_run(self, job_id: str, run_token: str, error: str, outcome: str = "failed") -> bool:
        """Mark a running job failed on the scheduler's behalf; False if it was not running.

        A job whose cancel was requested becomes `cancelled` instead: that is what was asked.
        """
        error = bounded_error(error)
        with transaction(self.url) as cur:
            cur.execute(
                "UPDATE jobs SET status = CASE WHEN cancel_requested THEN 'cancelled'"
                " ELSE 'failed' END, error = CASE WHEN cancel_requested THEN NULL ELSE %s END,"
                " worker_pid = NULL, finished_at = now(), updated_at = now()"
                " WHERE id = %s AND run_token = %s AND status = 'running' RETURNING id",
                (error, job_id, run_token),
            )
            changed = cur.fetchone() is not None
            if changed:
                cur.execute(
                    "UPDATE job_runs SET outcome = %s, error = %s, ended_at = now()"
                    " WHERE run_token = %s",
                    (outcome, error, run_token),
                )
        return changed

    def reap(self, job_id: str, run_token: str, exit_code: int) -> str | None:
        """Record a finished worker's exit; if it left its job running it crashed: fail the job.

        Returns the crash error, or None when the worker had recorded its own outcome.
        """
        with transaction(self.url) as cur:
            cur.execute(
                "UPDATE job_runs SET exit_code = %s WHERE run_token = %s", (exit_code, run_token)
            )
            cur.execute(
                "SELECT least(rounds_done + 1, total_rounds) FROM jobs"
                " WHERE id = %s AND run_token = %s AND status = 'running'",
                (job_id, run_token),
            )
            row = cur.fetchone()
        if row is None:
            return None
        error = f"worker crashed at round {row[0]}"
        return error if self.fail_run(job_id, run_token, error, outcome="crashed") else None

    def running(self) -> list[RunningJob]:
        """Return every job the database believes is running."""
        with transaction(self.url) as cur:
            cur.execute("SELECT id, run_token, worker_pid FROM jobs WHERE status = 'running'")
            return [RunningJob(*row) for row in cur.fetchall()]

    def requeue_interrupted(
        self, job: RunningJob, reason: str, exit_code: int | None = None
    ) -> None:
        """Put a job whose run the service lost back in the queue, with the same attempt.

        It resumes from its last checkpoint; a job whose cancel was asked is cancelled instead.
        """
        reason = bounded_error(reason)
        with transaction(self.url) as cur:
            cur.execute(
                "UPDATE jobs SET status = CASE WHEN cancel_requested THEN 'cancelled'"
                " ELSE 'queued' END, worker_pid = NULL,"
                " finished_at = CASE WHEN cancel_requested THEN now() END,"
                " rounds_done = coalesce(last_checkpoint_round, 0), updated_at = now()"
                " WHERE id = %s AND run_token IS NOT DISTINCT FROM %s AND status = 'running'",
                (job.job_id, job.run_token),
            )
            cur.execute(
                "UPDATE job_runs SET outcome = 'interrupted', error = %s, ended_at = now(),"
                " exit_code = coalesce(%s, exit_code) WHERE run_token = %s AND outcome IS NULL",
                (reason, exit_code, job.run_token),
            )
