"""`gpu_job_poller` owns the hand-off: real Postgres, a Dagster instance for test, a fake GPU.

The candidate runs are added to the instance the way the daemon would record them (their
tags and a final status), so each tick sees what it would see after a launch, a failure, an
operator's cancel or a success.
"""

import dagster as dg
import pytest

from retrain_assets.automation.gpu_job_poller import gpu_job_poller
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.gpu.protocol import JobStatus
from retrain_assets.machines import advance, history, pointer, repoint
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets.models.gate_results import GateResult, record_gate_result
from retrain_assets.models.resources import training_services
from retrain_assets.policy.busy import busy_customers
from retrain_assets.settings import storage_root
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets_tests.machines.training_services import GPU, SPEC, FakeGpuResource

KEY = "k1"


@pytest.fixture
def world(db, dagster_instance, tmp_path, monkeypatch):
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    GPU.__init__()  # a fresh fake service per test (jobs, calls, faults)
    return db, dagster_instance


def tick(world) -> dg.SensorResult:
    db, instance = world
    resources = {
        "project_db": ProjectDatabase(url=db),
        "gpu_service": FakeGpuResource(),
        "partition_storage": PartitionStorage(),
    }
    return gpu_job_poller(dg.build_sensor_context(instance=instance, resources=resources))


def keys(result: dg.SensorResult) -> list[str]:
    return [request.run_key for request in result.run_requests or []]


def record_run(instance, request: dg.RunRequest, status: dg.DagsterRunStatus) -> str:
    """Record the run the daemon launched for a request, as it ended (or is now)."""
    run = dg.DagsterRun(
        job_name="__ASSET_JOB",
        run_id=f"run-{request.run_key}",
        status=status,
        tags={
            **request.tags,
            "dagster/partition": request.partition_key,
            "dagster/run_key": request.run_key,
        },
        asset_selection=frozenset(request.asset_selection),
    )
    instance.add_run(run)
    return run.run_id


def job_succeeded(db) -> None:
    """acme's GPU job ran and succeeded: the machine waits in POLL_JOB."""
    start_training(db, "acme", KEY, SPEC)
    services = training_services(db, GPU, storage_root())
    advance(db, training_machine(), "acme", services)
    GPU.set_status("job-1", JobStatus.SUCCEEDED)


def test_a_failed_or_cancelled_candidate_run_is_requested_again_under_a_new_key(world):
    db, instance = world
    job_succeeded(db)
    first = tick(world)
    assert keys(first) == [f"candidate-{KEY}-1"]
    [request] = first.run_requests
    assert request.partition_key == "acme" and request.tags["retrain/handoff_attempt"] == "1"
    assert request.run_config == {"ops": {"model_candidate": {"config": {"run_key": KEY}}}}
    assert keys(tick(world)) == [f"candidate-{KEY}-1"]  # evaluated again: the same key
    assert GPU.calls["download"] == 0  # the sensor never downloads

    record_run(instance, request, dg.DagsterRunStatus.STARTED)
    assert keys(tick(world)) == []  # launched: nothing more to ask
    instance.delete_run(f"run-{request.run_key}")
    record_run(instance, request, dg.DagsterRunStatus.FAILURE)  # e.g. a database error at start
    second = tick(world)
    assert keys(second) == [f"candidate-{KEY}-2"]
    assert keys(tick(world)) == [f"candidate-{KEY}-2"]  # a tick evaluated twice asks once more
    assert busy_customers(db, instance) == {"acme": "training machine in AWAIT_CANDIDATE"}

    record_run(instance, second.run_requests[0], dg.DagsterRunStatus.CANCELED)  # an operator
    third = tick(world)
    assert keys(third) == [f"candidate-{KEY}-3"]
    record_run(instance, third.run_requests[0], dg.DagsterRunStatus.FAILURE)
    assert keys(tick(world)) == []
    ended = pointer(db, "training", "acme")
    assert (ended.state, ended.status) == ("FAILED", "terminal")
    assert ended.reason.startswith(
        f"hand-off budget spent: 3 of 3 candidate run(s) requested, none completed; last: "
        f"candidate-{KEY}-3 (run run-candidate-{KEY}-3) ended FAILURE"
    )
    assert busy_customers(db, instance) == {}  # terminal: the policy may decide again


def test_the_gate_verdict_and_the_registration_end_the_hand_off(world):
    db, instance = world
    job_succeeded(db)
    [request] = tick(world).run_requests
    # the candidate run downloaded (machine in AWAIT_GATE), gated and registered, then ended
    advance(
        db, training_machine(), "acme", training_services(db, GPU, storage_root(), fetching=True)
    )
    record_run(instance, request, dg.DagsterRunStatus.SUCCESS)
    record_gate_result(
        db,
        GateResult(
            run_key=KEY,
            customer="acme",
            passed=True,
            candidate_wape=0.30,
            reference_wape=0.36,
            reference="seasonal naive (same weekday last week)",
            champion_version=None,
            margin=0.02,
            holdout_window="2026-02-01 .. 2026-02-07",
            rows_scored=70,
            reason="it beats it",
        ),
    )
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            asset_key="registered_model",
            partition="acme",
            metadata={"run_key": KEY, "version": "4"},
        )
    )
    assert keys(tick(world)) == []
    done = pointer(db, "training", "acme")
    assert (done.state, done.reason) == (
        "DONE",
        "registered as version 4; gate passed: it beats it",
    )


def test_a_run_that_ends_without_its_verdict_is_re_requested_from_the_gate_state(world):
    """The run failed after the download (MLflow down): the candidate is kept, not re-trained."""
    db, instance = world
    job_succeeded(db)
    [request] = tick(world).run_requests
    advance(
        db, training_machine(), "acme", training_services(db, GPU, storage_root(), fetching=True)
    )
    record_run(instance, request, dg.DagsterRunStatus.FAILURE)
    assert keys(tick(world)) == [f"candidate-{KEY}-2"]
    assert pointer(db, "training", "acme").state == "AWAIT_GATE"
    assert (GPU.calls["download"], GPU.calls["submit"]) == (1, 1)


def test_a_training_job_re_run_over_a_saved_candidate_is_gated(world):
    """The run restarted over a key whose candidate is saved: the sensor asks for the gate."""
    db, _ = world
    job_succeeded(db)
    advance(
        db, training_machine(), "acme", training_services(db, GPU, storage_root(), fetching=True)
    )
    repoint(db, training_machine(), "acme", "FAILED", "given up before its gate")
    start_training(db, "acme", KEY, SPEC, retry=True)  # what training_job does
    rerun = advance(db, training_machine(), "acme", training_services(db, GPU, storage_root()))
    assert rerun.pointer.state == "AWAIT_GATE"
    assert keys(tick(world)) == [f"candidate-{KEY}-1"]
    assert (GPU.calls["download"], GPU.calls["submit"]) == (1, 1)


def test_a_pointer_its_run_never_advanced_is_adopted_after_a_grace(world, monkeypatch):
    import retrain_assets.automation.gpu_job_poller as poller

    db, _ = world
    start_training(db, "acme", KEY, SPEC)  # the run that started it crashed before advancing
    assert tick(world).skip_reason is not None
    assert pointer(db, "training", "acme").state == "INITIAL"
    monkeypatch.setattr(poller, "STRANDED_AFTER_SECONDS", 0.0)
    tick(world)
    assert pointer(db, "training", "acme").state == "POLL_JOB"
    assert [h.state for h in history(db, "training", "acme")][:2] == ["INITIAL", "CHECK_LAST_TRAIN"]
