"""The scheduler: hands queued jobs to worker processes, at most `slots` at a time.

It runs as one thread inside the service. Each tick it reaps finished workers (a worker that
exited while its job was still `running` crashed: the job fails with the round it reached),
then claims queued jobs while a slot is free. On startup it recovers from a service that died:
every job still `running` lost its worker, so it is requeued with the same attempt and resumes
from its last checkpoint.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import psutil

from retrain_assets.gpu.service.store import Claim, JobStore, RunningJob
from retrain_assets.gpu.service.worker import DB_URL_ENV, WORKER_MODULE, job_dir

log = logging.getLogger(__name__)
INTERRUPTED = "the service stopped while the job ran"


class Scheduler:
    """Claims queued jobs and supervises the worker processes that run them."""

    def __init__(
        self,
        store: JobStore,
        data_dir: Path,
        slots: int,
        poll_seconds: float = 0.25,
        stop_grace_seconds: float = 10.0,
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self.store = store
        self.data_dir = data_dir
        self.slots = slots
        self.poll_seconds = poll_seconds
        self.stop_grace_seconds = stop_grace_seconds
        self._workers: dict[str, tuple[Claim, subprocess.Popen[bytes]]] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def busy_slots(self) -> int:
        """Return how many worker processes run right now."""
        return len(self._workers)

    def start(self) -> None:
        """Recover jobs a previous service left running, then start the scheduling thread."""
        self.recover()
        self._thread = threading.Thread(target=self._loop, name="gpu-scheduler", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Look at the queue now instead of at the next poll (a job was submitted)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop scheduling, stop the workers and requeue their jobs to resume on next start."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        for _, process in self._workers.values():
            process.terminate()
        for claim, process in self._workers.values():
            try:
                process.wait(self.stop_grace_seconds)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            self.store.requeue_interrupted(
                RunningJob(claim.job_id, claim.run_token, process.pid), INTERRUPTED
            )
        self._workers.clear()

    def recover(self) -> None:
        """Requeue every job left `running` by a service that is gone (same attempt).

        A worker of that service may still be alive for a moment (it exits when it notices its
        parent died); it is killed first, so two processes never train the same job.
        """
        for job in self.store.running():
            if job.worker_pid is not None:
                _kill_orphan_worker(job.worker_pid, job.job_id)
            self.store.requeue_interrupted(job, INTERRUPTED)
            log.warning("job %s was running when the service stopped: requeued", job.job_id)

    def tick(self) -> None:
        """Reap finished workers, then start workers for queued jobs while slots are free."""
        self._reap()
        while len(self._workers) < self.slots and not self._stopping.is_set():
            claim = self.store.claim()
            if claim is None:
                return
            self._spawn(claim)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.tick()
            except Exception:  # the database may be briefly away: log it, retry next poll
                log.exception("scheduler tick failed; retrying")
            self._wake.wait(self.poll_seconds)
            self._wake.clear()

    def _reap(self) -> None:
        for job_id, (claim, process) in list(self._workers.items()):
            exit_code = process.poll()
            if exit_code is None:
                continue
            error = self.store.reap(job_id, claim.run_token, exit_code)
            if error:
                log.warning("job %s: %s (exit code %d)", job_id, error, exit_code)
            del self._workers[job_id]

    def _spawn(self, claim: Claim) -> None:
        folder = job_dir(self.data_dir, claim.job_id)
        folder.mkdir(parents=True, exist_ok=True)
        log_path = folder / f"worker-attempt{claim.attempt}-{claim.run_token[:8]}.log"
        command = [
            sys.executable,
            "-m",
            WORKER_MODULE,
            claim.job_id,
            claim.run_token,
            str(os.getpid()),
            str(self.data_dir),
        ]
        try:
            with log_path.open("ab") as output:
                process = subprocess.Popen(
                    command,
                    env={**os.environ, DB_URL_ENV: self.store.url},
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    # Ctrl-C on the service's terminal must not reach workers: stop() ends them.
                    start_new_session=True,
                )
        except OSError as error:
            self.store.fail_run(claim.job_id, claim.run_token, f"could not start a worker: {error}")
            log.exception("job %s: could not start a worker", claim.job_id)
            return
        self._workers[claim.job_id] = (claim, process)
        self.store.set_worker_pid(claim, process.pid)
        log.info(
            "job %s attempt %d: worker %d starts from round %d (log %s)",
            claim.job_id,
            claim.attempt,
            process.pid,
            claim.started_from_round,
            log_path,
        )


def _kill_orphan_worker(pid: int, job_id: str) -> None:
    """Kill `pid` if it is still a worker for `job_id` (a reused pid is left alone)."""
    try:
        process = psutil.Process(pid)
        command = process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # gone, or another user's process
        return
    if WORKER_MODULE in command and job_id in command:
        log.warning("killing worker %d of a previous service run (job %s)", pid, job_id)
        process.kill()
        process.wait(10)
