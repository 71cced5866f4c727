"""Dagster's default run launcher, plus a health check so run monitoring sees a dead run worker.

`DefaultRunLauncher` starts each run as a process of the code server, in its process group, so
a code server that crashes (or is killed, and `up` kills what is left of its group before
restarting it) takes its in-flight runs with it. The launcher
cannot check a run worker's health, so Dagster's run monitoring leaves such a run STARTED
forever; the per-customer run limits then hold every later run of that customer in the queue
(the hand-off's next candidate run included) and `retry`/`reset` refuse because a run is "in
progress": a customer stuck for good. Here the launcher reads the worker's pid from the run's
"Started process for run (pid: N)" event and answers FAILED when that process is gone, so run
monitoring (dagster.yaml: enabled, every 30 s) marks the run failed with the reason, and the
hand-off asks for its next attempt.

Run workers are local processes of the code server's host (`up` runs it beside the daemon). A
run without that event (one executed in-process) is left alone.
"""

from __future__ import annotations

import contextlib

import dagster as dg
import psutil

from retrain_assets.dagster_private import CheckRunHealthResult, WorkerStatus

STARTED_PROCESS = "Started process for run (pid: "
_PID_SLACK_SECONDS = 5.0  # the worker starts a moment before it records its event


def _worker_pid(instance: dg.DagsterInstance, run_id: str) -> tuple[int, float] | None:
    """Return (pid, when recorded) of the run's worker process, from its engine event."""
    # among a run's first engine events (runs are never resumed: max_resume_run_attempts 0)
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, ascending=True, limit=100
    ).records
    for record in records:
        entry = record.event_log_entry
        event = entry.dagster_event
        if event is None or not (entry.message or "").startswith(STARTED_PROCESS):
            continue
        pid = event.engine_event_data.metadata.get("pid")
        if pid is not None and isinstance(pid.value, int | str):
            return int(pid.value), entry.timestamp
    return None


def _alive_since(pid: int, recorded_at: float) -> bool:
    """Return whether `pid` runs and is the process that recorded the event (not a reuse)."""
    try:
        process = psutil.Process(pid)
        return (
            process.status() != psutil.STATUS_ZOMBIE
            and process.create_time() <= recorded_at + _PID_SLACK_SECONDS
        )
    except psutil.NoSuchProcess:
        return False


class LocalRunLauncher(dg.DefaultRunLauncher):
    """DefaultRunLauncher whose run workers Dagster's run monitoring can check."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        """Yes: run monitoring asks `check_run_worker_health` about every STARTED run."""
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        """RUNNING while the worker process lives; FAILED, naming it, once it is gone."""
        instance = self._instance
        current = instance.get_run_by_id(run.run_id)
        if current is None or current.is_finished:
            return CheckRunHealthResult(WorkerStatus.SUCCESS)
        found = _worker_pid(instance, run.run_id)
        if found is None:  # executed in-process, or the worker has not recorded itself yet
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        pid, recorded_at = found
        if _alive_since(pid, recorded_at):
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        with contextlib.suppress(Exception):  # it may have finished since we looked
            current = instance.get_run_by_id(run.run_id)
            if current is not None and current.is_finished:
                return CheckRunHealthResult(WorkerStatus.SUCCESS)
        return CheckRunHealthResult(
            WorkerStatus.FAILED,
            f"run worker process {pid} is gone (killed with the daemon or the host that ran it)",
        )
