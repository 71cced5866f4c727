"""A run whose worker process died is failed by Dagster's run monitoring, with the reason.

The chaos suite found it: a daemon killed while a run is in flight takes the run's worker
with it (they share its process group) and the run stayed STARTED forever, holding every later
run of its customer in the queue. The instance here is configured from the repository's
dagster.yaml (its run launcher and run monitoring), as `up` configures the platform's.
"""

import logging
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import yaml
from dagster._core.events import EngineEventData
from dagster._core.test_utils import instance_for_test
from dagster._daemon.monitoring.run_monitoring import monitor_started_run

DAGSTER_YAML = Path(__file__).resolve().parents[2] / "dagster.yaml"


def platform_instance():
    """An instance with the platform's run launcher and run monitoring settings."""
    settings = yaml.safe_load(DAGSTER_YAML.read_text())
    overrides = {key: settings[key] for key in ("run_launcher", "run_monitoring")}
    return instance_for_test(overrides=overrides)


def started_run(instance: dg.DagsterInstance, pid: int | None) -> str:
    """Add a STARTED run, with its worker's 'Started process' event when `pid` is given."""
    run = instance.add_run(
        dg.DagsterRun(
            job_name="__ASSET_JOB",
            run_id=str(uuid.uuid4()),
            status=dg.DagsterRunStatus.STARTED,
            tags={"dagster/partition": "acme", "customer": "acme"},
        )
    )
    if pid is not None:
        instance.report_engine_event(
            f"Started process for run (pid: {pid}).", run, EngineEventData.in_process(pid)
        )
    return run.run_id


def monitor(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    """Run one pass of Dagster's run monitoring over the run; return its status after."""
    record = instance.get_run_record_by_id(run_id)
    monitor_started_run(instance, None, record, logging.getLogger("test"))
    return instance.get_run_by_id(run_id).status


def test_a_run_whose_worker_died_is_failed_naming_the_worker_and_a_live_one_is_left():
    with platform_instance() as instance:
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        try:
            run_id = started_run(instance, worker.pid)
            assert monitor(instance, run_id) == dg.DagsterRunStatus.STARTED  # alive: left alone
        finally:
            worker.kill()
            worker.wait()
        assert monitor(instance, run_id) == dg.DagsterRunStatus.FAILURE
        failure = instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.RUN_FAILURE
        ).records
        assert f"run worker process {worker.pid} is gone" in failure[0].event_log_entry.message


def test_a_run_executed_in_process_has_no_worker_to_check_and_is_left_alone():
    with platform_instance() as instance:
        run_id = started_run(instance, pid=None)
        assert monitor(instance, run_id) == dg.DagsterRunStatus.STARTED
