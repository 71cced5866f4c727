"""A worker process's ledger: its job's progress, checkpoints and outcome in the job tables.

Every write is guarded by the `run_token` the scheduler gave the worker, so a worker that lost
its job (the service restarted and requeued it) can never overwrite the new run's state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.extensions

from retrain_assets.gpu.service.job_store import bounded_error
from retrain_assets.gpu.service.schemas import TrainingSpec
from retrain_assets.store.server import libpq_url


class LostOwnership(Exception):
    """The job is no longer this worker's to run (the service requeued or finished it)."""


@dataclass(frozen=True)
class WorkerJob:
    """What a worker needs to run its claimed job."""

    job_id: str
    spec: TrainingSpec
    attempt: int
    start_round: int
    checkpoint_path: str | None


class WorkerLedger:
    """A worker process's one connection: its progress, checkpoints and outcome.

    Every write names the run token; when the job is no longer this run's, LostOwnership.
    """

    def __init__(self, url: str, job_id: str, run_token: str) -> None:
        self.job_id = job_id
        self.run_token = run_token
        self._conn = psycopg2.connect(libpq_url(url))

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[psycopg2.extensions.cursor]:
        with self._conn, self._conn.cursor() as cur:
            yield cur

    def load(self) -> WorkerJob:
        """Return the claimed job's spec and where to start."""
        with self._tx() as cur:
            cur.execute(
                "SELECT spec, attempt, rounds_done, checkpoint_path FROM jobs"
                " WHERE id = %s AND run_token = %s AND status = 'running'",
                (self.job_id, self.run_token),
            )
            row = cur.fetchone()
        if row is None:
            raise LostOwnership(f"job {self.job_id} is not running under this worker's run")
        spec, attempt, start, checkpoint = row
        return WorkerJob(self.job_id, TrainingSpec.model_validate(spec), attempt, start, checkpoint)

    def report_round(self, rounds_done: int) -> bool:
        """Record one more finished round; return True when a cancel was requested."""
        with self._tx() as cur:
            cur.execute(
                "UPDATE jobs SET rounds_done = %s, updated_at = now()"
                " WHERE id = %s AND run_token = %s AND status = 'running'"
                " RETURNING cancel_requested",
                (rounds_done, self.job_id, self.run_token),
            )
            row = cur.fetchone()
        if row is None:
            raise LostOwnership(f"job {self.job_id} was taken away from this worker")
        return bool(row[0])

    def record_checkpoint(self, round_no: int, path: str) -> None:
        """Record a checkpoint that is already safely on disk."""
        self._finish_update(
            "last_checkpoint_round = %s, checkpoint_path = %s, rounds_done = %s",
            (round_no, path, round_no),
        )

    def succeed(self, path: str, sha256: str, size: int, metrics: dict[str, Any]) -> None:
        """Mark the job succeeded with its model file and metrics."""
        self._finish_update(
            "status = 'succeeded', artifact_path = %s, artifact_sha256 = %s, artifact_size = %s,"
            " metrics = %s, error = NULL, worker_pid = NULL, finished_at = now()",
            (path, sha256, size, json.dumps(metrics)),
            outcome="succeeded",
        )

    def fail(self, error: str) -> None:
        """Mark the job failed with the error that stopped it."""
        error = bounded_error(error)
        self._finish_update(
            "status = 'failed', error = %s, worker_pid = NULL, finished_at = now()",
            (error,),
            outcome="failed",
            error=error,
        )

    def cancelled(self) -> None:
        """Mark the job cancelled, as requested."""
        self._finish_update(
            "status = 'cancelled', worker_pid = NULL, finished_at = now()",
            (),
            outcome="cancelled",
        )

    def _finish_update(
        self,
        assignments: str,
        args: tuple[Any, ...],
        outcome: str | None = None,
        error: str | None = None,
    ) -> None:
        with self._tx() as cur:
            cur.execute(
                f"UPDATE jobs SET {assignments}, updated_at = now()"
                " WHERE id = %s AND run_token = %s AND status = 'running' RETURNING id",
                (*args, self.job_id, self.run_token),
            )
            if cur.fetchone() is None:
                raise LostOwnership(f"job {self.job_id} was taken away from this worker")
            if outcome is not None:
                cur.execute(
                    "UPDATE job_runs SET outcome = %s, error = %s, ended_at = now()"
                    " WHERE run_token = %s",
                    (outcome, error, self.run_token),
                )
