"""The scheduler: hands queued jobs to worker processes, at most `slots` at a time.

It runs as one thread inside the service. Each tick it checks that the service still holds
its database lock, reaps finished workers (a worker that exited while its job was still
`running` crashed: the job fails with the round it reached), then claims queued jobs while a
slot is free. On startup it recovers from a service that died: every job still `running`
lost its worker, so it is requeued with the same attempt and resumes from its last
checkpoint.

A Postgres outage is not a crash. The lock's session ends with it, so the scheduler pauses
(claims nothing, records nothing) until Postgres answers, then takes the lock back and
requeues every running job whose worker lost the database, or that no live worker of this
service runs, to resume from its checkpoint. If another service took the lock meanwhile,
this one stops its workers without touching the database and asks the process to stop.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import psutil

from retrain_assets.gpu.service.job_store import Claim, JobStore, RunningJob
from retrain_assets.gpu.service.service_lock import LockTaken, ServiceLock
from retrain_assets.gpu.service.worker import (
    DATABASE_ERRORS,
    DATABASE_UNAVAILABLE_EXIT,
    DB_URL_ENV,
    WORKER_MODULE,
    job_dir,
)

log = logging.getLogger(__name__)
INTERRUPTED = "the service stopped while the job ran"
DATABASE_UNAVAILABLE = "database unavailable while the job ran; resumed from its last checkpoint"


class Scheduler:
    """Claims queued jobs and supervises the worker processes that run them."""

    def __init__(
        self,
        store: JobStore,
        data_dir: Path,
        slots: int,
        lock: ServiceLock,
        on_lost_ownership: Callable[[str], None] | None = None,
        poll_seconds: float = 0.25,
        stop_grace_seconds: float = 10.0,
    ) -> None:
        """Schedule on `store` while `lock` (already acquired) is held.

        `on_lost_ownership(reason)` is called (from the scheduling thread) when another
        service took the lock: the process must stop.
        """
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self.store = store
        self.data_dir = data_dir
        self.slots = slots
        self.lock = lock
        self.on_lost_ownership = on_lost_ownership
        self.poll_seconds = poll_seconds
        self.stop_grace_seconds = stop_grace_seconds
        self._workers: dict[str, tuple[Claim, subprocess.Popen[bytes]]] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock_held = True
        self._owner = True
        self._database_down = False
        self._recovery_due = False

    @property
    def busy_slots(self) -> int:
        """Return how many worker processes run right now."""
        return len(self._workers)

    @property
    def lock_held(self) -> bool:
        """Return whether the last tick found the service lock held (for /healthz)."""
        return self._lock_held

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
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        stopped = self._stop_workers()
        if not self._owner:  # another service owns the database now: write nothing
            return
        for claim, process in stopped:
            try:
                self.store.requeue_interrupted(
                    RunningJob(claim.job_id, claim.run_token, process.pid),
                    INTERRUPTED,
                    process.returncode,
                )
            except DATABASE_ERRORS as error:
                log.warning(
                    "job %s: could not requeue (%s); the next start recovers it",
                    claim.job_id,
                    _first_line(error),
                )

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
        """Check the lock, reap finished workers, then start workers while slots are free."""
        if not self.lock.is_held():
            self._lock_held = False
            self._recovery_due = True  # until it completes, even if Postgres flaps meanwhile
            if not self._regain_lock():
                return
        self._lock_held = True
        self._reap()
        if self._recovery_due:
            self._requeue_unattended()
            self._recovery_due = False
        while len(self._workers) < self.slots and not self._stopping.is_set():
            claim = self.store.claim()
            if claim is None:
                break
            self._spawn(claim)
        if self._database_down:
            log.info("database reachable again")
            self._database_down = False

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.tick()
            except DATABASE_ERRORS as error:  # away for a moment: say so once, retry each poll
                self._note_outage(error)
            except Exception:
                log.exception("scheduler tick failed; retrying")
            self._wake.wait(self.poll_seconds)
            self._wake.clear()

    def _note_outage(self, error: BaseException) -> None:
        if not self._database_down:
            log.warning(
                "database unavailable (%s): no job is claimed or recorded until it is back",
                _first_line(error),
            )
            self._database_down = True

    def _regain_lock(self) -> bool:
        """Take the lock back after its session ended; True when this service owns it again."""
        if not self._database_down:
            log.warning(
                "the session holding the service lock ended (Postgres restarted or "
                "unreachable): pausing until the lock is taken back"
            )
            self._database_down = True
        try:
            if not self.lock.retake():
                return False
        except LockTaken as taken:
            self._give_up(str(taken))
            return False
        log.info("service lock taken back: requeuing jobs that lost their database")
        return True

    def _requeue_unattended(self) -> None:
        """Requeue every running job no live worker of this service runs (same attempt)."""
        ours = {claim.run_token for claim, _ in self._workers.values()}
        for job in self.store.running():
            if job.run_token in ours:
                continue
            if job.worker_pid is not None:
                _kill_orphan_worker(job.worker_pid, job.job_id)
            self.store.requeue_interrupted(job, DATABASE_UNAVAILABLE)
            log.warning("job %s lost its run during the outage: requeued", job.job_id)

    def _give_up(self, reason: str) -> None:
        """Another service owns the database: stop workers, write nothing, stop the process."""
        log.error("%s", reason)
        self._owner = False
        self._stopping.set()
        self._stop_workers()
        if self.on_lost_ownership is not None:
            self.on_lost_ownership(reason)

    def _stop_workers(self) -> list[tuple[Claim, subprocess.Popen[bytes]]]:
        """Terminate every worker (SIGKILL after the grace) and return them, forgotten."""
        workers = list(self._workers.values())
        for _, process in workers:
            process.terminate()
        for _, process in workers:
            try:
                process.wait(self.stop_grace_seconds)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._workers.clear()
        return workers

    def _reap(self) -> None:
        for job_id, (claim, process) in list(self._workers.items()):
            exit_code = process.poll()
            if exit_code is None:
                continue
            if exit_code == DATABASE_UNAVAILABLE_EXIT:
                self.store.requeue_interrupted(
                    RunningJob(job_id, claim.run_token, process.pid),
                    DATABASE_UNAVAILABLE,
                    exit_code,
                )
                log.warning("job %s: its worker lost the database; requeued", job_id)
            else:
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


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


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
