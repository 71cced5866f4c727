"""Training end to end through the real GPU service: submit, end the run, poll, fetch."""

import dagster as dg
import psutil
import pytest

from retrain_assets.machines.engine import advance
from retrain_assets.machines.store import history, pointer, pointers_in_state
from retrain_assets.machines.training import training_machine
from retrain_assets.models.candidates import CandidateTable
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.models.resources import GpuServiceResource, training_services
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.settings import storage_root
from retrain_assets_tests.models.flow import (
    CUSTOMER,
    materialize,
    poll_until_requested,
    tick,
    train_config,
)

pytestmark = pytest.mark.system


def test_the_run_ends_while_the_job_trains_and_the_poller_fetches_one_candidate(model_world):
    instance, service, db = model_world.instance, model_world.service, model_world.db
    # the shared services (GPU service, MLflow server, their workers) run before anything starts
    services_before = {c.pid for c in psutil.Process().children(recursive=True)}
    slow = {"faults": {"slow_seconds_per_round": 0.1, "on_attempts": [1]}}
    submitted = materialize(instance, [training_job], train_config(**slow))
    meta = submitted.asset_materializations_for_node("training_job")[0].metadata
    key, job_id = meta["run_key"].value, meta["job_id"].value

    other = materialize(instance, [training_job], train_config(**slow), customer="beta-de")
    assert other.success

    # The Dagster runs are over, the GPU jobs are not: each wait is a row in POLL_JOB, and no
    # process of ours is held for it.
    assert all(run.is_finished for run in instance.get_runs())
    service_tree = services_before | {
        c.pid for c in psutil.Process(service.process.pid).children(recursive=True)
    }
    assert [c for c in psutil.Process().children(recursive=True) if c.pid not in service_tree] == []
    assert {p.customer for p in pointers_in_state(db, "training", "POLL_JOB")} == {
        CUSTOMER,
        "beta-de",
    }
    assert service.job(job_id)["status"] in ("queued", "running")
    polled = tick(instance)
    assert polled.run_requests == []  # still training: a poll visit, no request
    assert [e for e in polled.asset_events if e.partition == CUSTOMER] == []  # not a move

    moves: list = []
    request = poll_until_requested(instance, customer=CUSTOMER, moves=moves)
    assert request.run_key == f"candidate-{key}-1" and request.partition_key == CUSTOMER
    # the move out of POLL_JOB is shown on the customer's partition of training_job
    assert [(m.asset_key, m.metadata["state"].value) for m in moves] == [
        (dg.AssetKey("training_job"), "AWAIT_CANDIDATE")
    ]
    assert request.tags["customer"] == CUSTOMER
    assert pointer(db, "training", CUSTOMER).state == "AWAIT_CANDIDATE"
    fetched = materialize(instance, [model_candidate], request.run_config)
    meta = fetched.asset_materializations_for_node("model_candidate")[0].metadata
    assert meta["sha256"].value == service.call("GET", f"/jobs/{job_id}/artifact").json()["sha256"]
    assert pointer(db, "training", CUSTOMER).state == "AWAIT_GATE"  # the gate comes next

    # Asked again (a retried run, the same key requested twice): still one job, one candidate.
    again = materialize(instance, [training_job], train_config(**slow))
    assert again.asset_materializations_for_node("training_job")[0].metadata["run_key"].value == key
    materialize(instance, [model_candidate], request.run_config)
    assert CandidateTable(db, storage_root()).count_for(key) == 1
    assert service.client().find(key).id == job_id
    assert len(service.job(job_id)["runs"]) == 1  # trained once


def test_a_submission_that_always_fails_stops_after_three_attempts(model_world, monkeypatch):
    from retrain_assets_tests.support.processes import free_port

    monkeypatch.setenv("RETRAIN_GPU_URL", f"http://127.0.0.1:{free_port()}")  # nobody there
    result = materialize(model_world.instance, [training_job], train_config())
    meta = result.asset_materializations_for_node("training_job")[0].metadata
    assert meta["machine_state"].value == "SUBMIT_JOB"  # the resubmission waits for the sensor
    assert "Connection" in meta["last_error"].value
    assert "next try of SUBMIT_JOB (visit 2 of 3) due at" in meta["next_try"].value
    machine = training_machine()
    services = training_services(model_world.db, GpuServiceResource().client(), storage_root())
    for _ in range(2):  # the sensor's next two ticks, each one submission
        advance(model_world.db, machine, CUSTOMER, services)
    rows = history(model_world.db, "training", CUSTOMER)
    submits = [row for row in rows if row.state == "SUBMIT_JOB" and row.note != "not run"]
    assert len(submits) == 3 and all("Connection" in (row.error or "") for row in submits)
    final = pointer(model_world.db, "training", CUSTOMER)
    assert final.state == "FAILED" and final.reason.startswith("max retries reached")


def test_a_failed_download_costs_a_download_not_a_retrain(model_world):
    instance, service, db = model_world.instance, model_world.service, model_world.db
    submitted = materialize(instance, [training_job], train_config())
    meta = submitted.asset_materializations_for_node("training_job")[0].metadata
    key, job_id = meta["run_key"].value, meta["job_id"].value
    request = poll_until_requested(instance)

    model = service.data_dir / "jobs" / job_id / "model.txt"
    original = model.read_bytes()
    model.write_bytes(original + b"\ncorrupted in transit")
    broken = materialize(instance, [model_candidate], request.run_config, raise_on_error=False)
    assert not broken.success
    error = broken.get_step_failure_events()[0].step_failure_data.error.to_string()
    assert "sha256" in error
    assert CandidateTable(db, storage_root()).get(key) is None  # nothing half-registered

    model.write_bytes(original)
    materialize(instance, [model_candidate], request.run_config)
    assert CandidateTable(db, storage_root()).count_for(key) == 1
    job = service.job(job_id)
    assert job["attempt"] == 1 and len(job["runs"]) == 1  # no second training
