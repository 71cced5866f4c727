"""dagster.yaml's run queue: one run at a time per partition, however the run was launched.

The limits are read from an instance built on the repository's dagster.yaml and applied by the
counter the queued-run daemon itself uses, so this is the rule the daemon enforces.
"""

import os
import uuid

import dagster as dg
import pytest
from dagster._utils.tags import TagConcurrencyLimitsCounter

from retrain_assets.runtime.environment import child_environment, prepare_dagster_home, repo_file
from retrain_assets.store.server import ensure_database

SENSOR_RUN = {"dagster/partition": "acme", "customer": "acme", "dagster/sensor_name": "x"}
UI_RUN = {"dagster/partition": "acme", "dagster/user": "ana"}  # the launchpad adds no `customer`


@pytest.fixture
def instance(tmp_path, pg_server, monkeypatch):
    """A Dagster instance on the repository's dagster.yaml; os.environ restored afterwards."""
    saved = dict(os.environ)
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RETRAIN_DB_PREFIX", f"t{uuid.uuid4().hex[:10]}_")
    ensure_database(pg_server, "dagster")
    os.environ.update(child_environment(pg_server, prepare_dagster_home(repo_file("dagster.yaml"))))
    with dg.DagsterInstance.get() as instance:
        yield instance
    os.environ.clear()
    os.environ.update(saved)


def queue(instance: dg.DagsterInstance, in_progress: list[dict]) -> TagConcurrencyLimitsCounter:
    """Return the daemon's limit counter with runs carrying `in_progress` tags started."""
    limits = instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
    runs = [dg.DagsterRun(job_name="j", run_id=f"r{i}", tags=t) for i, t in enumerate(in_progress)]
    return TagConcurrencyLimitsCounter(limits, runs)


def run(tags: dict) -> dg.DagsterRun:
    return dg.DagsterRun(job_name="j", run_id=uuid.uuid4().hex, tags=tags)


def test_a_run_launched_from_the_ui_waits_for_the_sensors_run_of_its_customer(instance):
    assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 4
    assert isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)
    assert instance.run_coordinator.dequeue_interval_seconds == 1  # a queued run starts soon
    assert queue(instance, [SENSOR_RUN]).is_blocked(run(UI_RUN))
    assert queue(instance, [UI_RUN]).is_blocked(run(SENSOR_RUN))
    assert not queue(instance, [SENSOR_RUN]).is_blocked(run({"dagster/partition": "bolt"}))


def test_one_day_is_written_by_one_run_and_other_days_go_ahead(instance):
    day = {"dagster/partition": "2026-03-01"}
    assert queue(instance, [day]).is_blocked(run(day))
    assert not queue(instance, [day]).is_blocked(run({"dagster/partition": "2026-03-02"}))
