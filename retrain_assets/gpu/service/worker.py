"""One worker process: trains one claimed job and records how it ended.

The scheduler starts `python -m retrain_assets.gpu.service.worker JOB_ID RUN_TOKEN PARENT_PID
DATA_DIR` with the database URL in the environment (never on the command line, where `ps`
would show its password). Running each job in its own process keeps a crashing or leaking
training run from taking the API down, and lets the service cap concurrency at its slots.
Any exception while training becomes the job's recorded error; a process that dies without
recording one is noticed by the scheduler, which records the crash instead. A worker that
loses the database (Postgres restarted under it) records nothing and exits with
DATABASE_UNAVAILABLE_EXIT: the scheduler requeues its job to resume from its last checkpoint
once Postgres is back, instead of calling it a crash.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from pathlib import Path

import psycopg2

from retrain_assets.gpu.service.faults import FaultPlan
from retrain_assets.gpu.service.job_store import bounded_error
from retrain_assets.gpu.service.worker_ledger import LostOwnership, WorkerLedger
from retrain_assets.settings_model import current_settings

DB_URL_ENV = "RETRAIN_GPU_DB_URL"
WORKER_MODULE = "retrain_assets.gpu.service.worker"
DATABASE_UNAVAILABLE_EXIT = 75  # EX_TEMPFAIL: the job's outcome could not be recorded
DATABASE_ERRORS = (psycopg2.OperationalError, psycopg2.InterfaceError)
log = logging.getLogger(__name__)


class DatabaseUnavailable(Exception):
    """The worker lost its connection to Postgres: nothing more can be recorded."""


class JobCancelled(Exception):
    """A cancel was requested for the job this worker runs."""


def describe(error: BaseException) -> str:
    """Return the text recorded as a job's error: the exception's type and message, bounded."""
    return bounded_error(f"{type(error).__name__}: {error}")


def job_dir(data_dir: Path, job_id: str) -> Path:
    """Return the folder holding one job's checkpoints and model."""
    return data_dir / "jobs" / job_id


def run_job(db_url: str, job_id: str, run_token: str, data_dir: Path) -> None:
    """Train the claimed job to its end and record the outcome (succeeded/failed/cancelled).

    Raises DatabaseUnavailable, having recorded nothing, when Postgres cannot be reached.
    """
    try:
        _run_job(db_url, job_id, run_token, data_dir)
    except DATABASE_ERRORS as error:
        raise DatabaseUnavailable(f"job {job_id}: database unavailable: {error}") from error


def _run_job(db_url: str, job_id: str, run_token: str, data_dir: Path) -> None:
    # Imported here: the scheduler imports this module for its constants and needs no LightGBM.
    from retrain_assets.gpu.service.trainer import TrainingHooks, train

    ledger = WorkerLedger(db_url, job_id, run_token)
    try:
        job = ledger.load()
        faults = FaultPlan.for_attempt(job.spec.faults, job.attempt)

        def after_round(round_no: int) -> None:
            faults.after_round(round_no)
            if ledger.report_round(round_no):
                raise JobCancelled(f"cancel requested at round {round_no}")

        hooks = TrainingHooks(
            before_round=faults.before_round,
            after_round=after_round,
            on_checkpoint=lambda round_no, path: ledger.record_checkpoint(round_no, str(path)),
        )
        log.info("job %s attempt %d: training from round %d", job_id, job.attempt, job.start_round)
        checkpoint = Path(job.checkpoint_path) if job.checkpoint_path else None
        try:
            result = train(job.spec, job_dir(data_dir, job_id), job.start_round, checkpoint, hooks)
        except JobCancelled as cancel:
            log.info("job %s: %s", job_id, cancel)
            ledger.cancelled()
            return
        except (LostOwnership, *DATABASE_ERRORS):
            raise  # a lost database is not the job's error: nothing can be recorded now
        except Exception as error:
            log.exception("job %s failed", job_id)
            ledger.fail(describe(error))
            return
        ledger.succeed(str(result.model_path), result.sha256, result.size, result.metrics)
        log.info("job %s succeeded: sha256 %s, %s", job_id, result.sha256, result.metrics)
    except LostOwnership as lost:
        log.warning("%s; stopping without recording anything", lost)
    finally:
        ledger.close()


def exit_with_parent(parent_pid: int, interval: float = 0.2) -> threading.Thread:
    """Exit this process as soon as the service that started it is gone.

    A worker outliving a killed service would keep training a job the restarted service
    resumes elsewhere; a GPU box that lost its service has lost its workers too.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        log.warning("service process %d is gone; worker exits", parent_pid)
        logging.shutdown()
        os._exit(3)

    thread = threading.Thread(target=watch, name="parent-watchdog", daemon=True)
    thread.start()
    return thread


def skip_scikit_learn() -> None:
    """Keep LightGBM from importing scikit-learn, which it does eagerly when installed.

    The worker only uses LightGBM's core API; importing scikit-learn would add about two
    seconds to every job's start. Only a worker process calls this, before LightGBM loads.
    """
    sys.modules.setdefault("sklearn", None)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    """Entry point of a worker process."""
    skip_scikit_learn()
    parser = argparse.ArgumentParser(prog=WORKER_MODULE)
    parser.add_argument("job_id")
    parser.add_argument("run_token")
    parser.add_argument("parent_pid", type=int)
    parser.add_argument("data_dir", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
    )
    exit_with_parent(args.parent_pid)
    db_url = current_settings().gpu_db_url
    if db_url is None:
        parser.error(f"{DB_URL_ENV} is not set: the GPU service sets it for the workers it starts")
    try:
        run_job(db_url, args.job_id, args.run_token, args.data_dir)
    except DatabaseUnavailable as lost:
        log.error("%s; exiting without recording anything", lost)
        return DATABASE_UNAVAILABLE_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
