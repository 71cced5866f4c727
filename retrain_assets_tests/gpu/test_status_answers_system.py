"""The real GPU service answering the poller's status batch with errors (issue 38).

`gpu_job_poller` is evaluated in-process on the real Postgres against a real service process:
a refused token (401), a 500 with a body and a 200 that does not parse are each recorded on
the machine as what they are and spend a POLL_JOB visit; only the injected outage (503) is
recorded as the service being unreachable.
"""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from retrain_assets.automation.gpu_job_poller import gpu_job_poller
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.machines import advance, history, pointer
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets.models.resources import GpuServiceResource, training_services
from retrain_assets.runtime.machine_report import status_lines
from retrain_assets.settings import storage_root
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets.store.server import PostgresServer
from retrain_assets_tests.gpu.service_process import ServiceProcess, running_service, training_spec

pytestmark = pytest.mark.system


@pytest.fixture
def service(pg_server: PostgresServer, tmp_path: Path) -> Iterator[ServiceProcess]:
    with running_service(pg_url=pg_server.url, home=tmp_path / "gpu-home") as svc:
        yield svc


def tick(db: str, instance: dg.DagsterInstance, service: ServiceProcess, token: str) -> str:
    """Evaluate the poller once against the service; return the tick's skip reason."""
    resources = {
        "project_db": ProjectDatabase(url=db),
        "gpu_service": GpuServiceResource(url=service.url, token=token, timeout_seconds=10),
        "partition_storage": PartitionStorage(),
    }
    result = gpu_job_poller(dg.build_sensor_context(instance=instance, resources=resources))
    assert not result.run_requests and result.skip_reason is not None
    return result.skip_reason.skip_message


def test_error_answers_are_failed_polls_and_only_a_503_is_an_outage(
    app_db, dagster_instance, service, dataset, tmp_path, monkeypatch
):
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RETRAIN_TRAINING_BACKEND", raising=False)
    slow = {"slow_seconds_per_round": 5.0, "on_attempts": [1]}  # it trains the whole test long
    start_training(app_db, "acme", "k-answers", training_spec(dataset, faults=slow))
    with service.client() as client:
        advance(
            app_db, training_machine(), "acme", training_services(app_db, client, storage_root())
        )
    polled = pointer(app_db, "training", "acme")
    assert polled.state == "POLL_JOB"
    job, visits = polled.payload["job_id"], polled.visits["POLL_JOB"]
    unread = f"status of job {job} not read (not an outage): GpuServiceError: GPU service POST"

    said = tick(app_db, dagster_instance, service, token="not-the-token")
    p = pointer(app_db, "training", "acme")
    assert p.last_error.startswith(f"{unread} /jobs/status -> 401: "), p.last_error
    assert p.visits["POLL_JOB"] == visits + 1 and p.payload.get("unreachable_since") is None
    assert said.startswith("GPU status call failed (not an outage), recorded as a failed poll")
    assert "GpuServiceError: GPU service POST /jobs/status -> 401: " in said

    for status, body, words in [
        (500, "Internal Server Error", "/jobs/status -> 500: Internal Server Error"),
        (200, "<html>maintenance</html>", None),
    ]:
        fault = {"seconds": 120, "status": status, "body": body}
        assert service.call("POST", "/faults/answer", json=fault).status_code == 200
        tick(app_db, dagster_instance, service, token=service.token)
        p = pointer(app_db, "training", "acme")
        if words is not None:
            assert p.last_error == f"{unread} {words}"
        else:  # the client cannot parse the answer: its own error type, not an outage
            assert p.last_error.startswith(
                f"status of job {job} not read (not an outage): JSONDecodeError: "
            ), p.last_error
        row = history(app_db, "training", "acme")[-1]
        assert (row.state, row.ok, row.error) == ("POLL_JOB", False, p.last_error)
    assert p.visits["POLL_JOB"] == visits + 3  # each answer spent a visit

    assert service.call("POST", "/faults/outage", json={"seconds": 120}).status_code == 200
    said = tick(app_db, dagster_instance, service, token=service.token)
    p = pointer(app_db, "training", "acme")
    assert p.last_error.startswith("training service unreachable since "), p.last_error
    assert "GpuServiceError: GPU service POST /jobs/status -> 503: " in p.last_error
    assert said.startswith("GPU service unreachable, 0 poll(s) wait, 1 outage(s) recorded")
    shown = "\n".join(status_lines(app_db, "acme"))
    assert "    last error: training service unreachable since " in shown
