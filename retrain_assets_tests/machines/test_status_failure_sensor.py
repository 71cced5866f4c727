"""`gpu_job_poller` when its status batch fails (issue 38): an outage waits, an answer is an error.

Real Postgres, a Dagster instance for test, the module's fake GPU service whose `statuses`
raises what each backend's client raises. Only no answer (refused, a timeout, 502/503/504,
slurmctld down) is an outage; a refused token, a 404, a 500 with a body or an answer that does
not parse is recorded on every polling machine with its text, and spends its visit each tick.
"""

from __future__ import annotations

import json

import dagster as dg
import pytest

from retrain_assets.automation.gpu_job_poller import gpu_job_poller
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.gpu.client import GpuServiceError
from retrain_assets.gpu.slurm.rest import SlurmRestError
from retrain_assets.machines import advance, history, pointer
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets.runtime.machine_report import status_lines
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets_tests.machines.training_services import GPU, SPEC, FakeGpuResource, services
from retrain_assets_tests.policy.tick_log import Messages

CUSTOMERS = ["acme", "umbrella"]


def logged_tick(db: str, instance: dg.DagsterInstance) -> tuple[dg.SensorResult, list[str]]:
    """Evaluate the sensor once; return its result and what its log (the tick's logs) got."""
    resources = {
        "project_db": ProjectDatabase(url=db),
        "gpu_service": FakeGpuResource(),
        "partition_storage": PartitionStorage(),
    }
    context = dg.build_sensor_context(instance=instance, resources=resources)
    log = Messages()
    context.log.addHandler(log)
    return gpu_job_poller(context), log.lines


@pytest.fixture
def polling(db, tmp_path, monkeypatch) -> dict[str, int]:
    """acme and umbrella waiting in POLL_JOB; returns each one's POLL_JOB visits so far."""
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    GPU.__init__()
    for customer in CUSTOMERS:
        start_training(db, customer, f"{customer}-k", SPEC)
        advance(db, training_machine(), customer, services(tmp_path, gpu=GPU))
    return {c: pointer(db, "training", c).visits["POLL_JOB"] for c in CUSTOMERS}


def batch_raises(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def statuses(job_ids: list[str]) -> dict[str, object]:
        GPU.calls["statuses"] += 1
        raise error

    monkeypatch.setattr(GPU, "statuses", statuses)


NOT_OUTAGES = [
    GpuServiceError("POST", "/jobs/status", 401, '{"detail":"invalid bearer token"}'),
    GpuServiceError("POST", "/jobs/status", 500, "Internal Server Error"),
    SlurmRestError("GET /jobs", 401, "not a JSON object: 'Authentication failure'"),
    json.JSONDecodeError("Expecting value", "<html>oops</html>", 0),
]


@pytest.mark.parametrize("error", NOT_OUTAGES, ids=["401", "500", "slurm-401", "unparseable"])
def test_a_batch_answered_with_an_error_is_recorded_on_every_poll_and_spends_it(
    db, dagster_instance, polling, monkeypatch, error
):
    batch_raises(monkeypatch, error)
    asked = GPU.calls["get"]
    text = f"{type(error).__name__}: {error}"
    said = "GPU status call failed (not an outage), recorded as a failed poll on 2 machine(s): "
    for tick in (1, 2):  # every tick: a failed visit, not one recorded outage and then silence
        result, logged = logged_tick(db, dagster_instance)
        assert not result.run_requests
        for customer in CUSTOMERS:
            p = pointer(db, "training", customer)
            job = p.payload["job_id"]
            expected = f"status of job {job} not read (not an outage): {text}"
            assert (p.state, p.last_error) == ("POLL_JOB", expected)
            assert p.visits["POLL_JOB"] == polling[customer] + tick
            assert p.payload.get("unreachable_since") is None
            row = history(db, "training", customer)[-1]
            assert (row.state, row.ok, row.error) == ("POLL_JOB", False, expected)
        assert said + text in logged
        assert result.skip_reason.skip_message.startswith(said + text)
    assert GPU.calls["get"] == asked and GPU.calls["statuses"] == 2  # no poll asked alone
    shown = "\n".join(status_lines(db, "acme"))
    assert f"    last error: status of job job-1 not read (not an outage): {text}" in shown


OUTAGES = [
    GpuServiceError("POST", "/jobs/status", 503, "database away"),
    GpuServiceError("POST", "/jobs/status", None, "ConnectionError: connection refused"),
    SlurmRestError("GET /jobs", None, "Unable to contact slurm controller", (-1,)),
]


@pytest.mark.parametrize("error", OUTAGES, ids=["503", "refused", "slurmctld-down"])
def test_a_batch_without_an_answer_is_an_outage_recorded_once(
    db, dagster_instance, polling, monkeypatch, error
):
    batch_raises(monkeypatch, error)
    result, logged = logged_tick(db, dagster_instance)
    first = {c: pointer(db, "training", c) for c in CUSTOMERS}
    for customer, p in first.items():
        assert p.last_error.startswith("training service unreachable since ")
        assert p.last_error.endswith(f": {type(error).__name__}: {error}")
        assert p.visits["POLL_JOB"] == polling[customer] + 1
    said = "GPU service unreachable, 0 poll(s) wait, 2 outage(s) recorded on the machine: "
    assert said + f"{type(error).__name__}: {error}" in logged
    assert result.skip_reason.skip_message.startswith(said)
    again, logged = logged_tick(db, dagster_instance)  # the rest of the outage: left alone
    assert {c: pointer(db, "training", c) for c in CUSTOMERS} == first
    assert again.skip_reason.skip_message.startswith("GPU service unreachable, 2 poll(s) wait")
