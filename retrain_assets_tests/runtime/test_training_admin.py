"""`retrain-assets reset` / `retry`: an operator's repair, refused when unsafe, always recorded."""

import dagster as dg
import pytest

from retrain_assets.automation.gpu_job_poller import gpu_job_poller
from retrain_assets.cli import main
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.gpu.protocol import JobStatus
from retrain_assets.machines import advance, history, pointer
from retrain_assets.machines.backoff import Backoff
from retrain_assets.machines.repoint import UnknownState
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets.models.resources import training_services
from retrain_assets.runtime.training_admin import (
    OperatorRefused,
    reset_training,
    retry_training,
)
from retrain_assets.settings import storage_root
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets_tests.machines.training_services import GPU, SPEC, FakeGpuResource

KEY = "k1"


@pytest.fixture
def world(app_db, dagster_instance, tmp_path, monkeypatch):
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    GPU.__init__()
    return app_db, dagster_instance


def tick(db, instance) -> dg.SensorResult:
    resources = {
        "project_db": ProjectDatabase(url=db),
        "gpu_service": FakeGpuResource(),
        "partition_storage": PartitionStorage(),
    }
    return gpu_job_poller(dg.build_sensor_context(instance=instance, resources=resources))


def failed_download(db) -> None:
    """acme's job succeeded, then every download failed: the run ended FAILED."""
    start_training(db, "acme", KEY, SPEC)
    advance(db, training_machine(), "acme", training_services(db, GPU, storage_root()))
    GPU.set_status("job-1", JobStatus.SUCCEEDED)
    GPU.download_errors = [ConnectionError("reset by peer")] * 5
    at_once = training_machine(retry_backoff=Backoff(0, 0, 0))  # each retry due at once
    for _ in range(5):  # five downloads, each its own advance
        advance(db, at_once, "acme", training_services(db, GPU, storage_root(), fetching=True))
    assert pointer(db, "training", "acme").state == "FAILED"


def test_retry_re_enters_a_failed_run_where_it_can_a_download_not_a_retrain(world):
    db, instance = world
    failed_download(db)
    done = retry_training(db, instance, "acme", "ana", "the network is back")
    assert (done.before.state, done.after.state, done.after.status) == (
        "FAILED",
        "INITIAL",
        "waiting",
    )
    assert "GPU job job-1: a succeeded job is downloaded (not retrained)" in done.next_step
    row = history(db, "training", "acme")[-1]
    assert (row.state, row.visit, row.next_state) == ("FAILED", 0, "INITIAL")
    assert row.note.startswith("retry by ana: the network is back (it had failed: max retries")
    [request] = tick(db, instance).run_requests  # the next tick re-enters: to the hand-off
    assert request.run_key == f"candidate-{KEY}-1"
    assert pointer(db, "training", "acme").state == "AWAIT_CANDIDATE"
    assert (GPU.calls["submit"], GPU.calls["download"]) == (1, 5)  # no new training
    with pytest.raises(OperatorRefused, match="is in AWAIT_CANDIDATE, not FAILED"):
        retry_training(db, instance, "acme", "ana")


def test_retry_refuses_a_run_refused_for_its_window(world):
    db, instance = world
    judged = {"enough": False, "window": "2025-01-01 .. 2025-02-19", "reason": "no rows"}
    start_training(db, "acme", KEY, SPEC, evidence=judged)
    advance(db, training_machine(), "acme", training_services(db, GPU, storage_root()))
    assert pointer(db, "training", "acme").state == "FAILED"
    with pytest.raises(OperatorRefused, match=r"window 2025-01-01 \.\. 2025-02-19 cannot be"):
        retry_training(db, instance, "acme", "ana")
    assert pointer(db, "training", "acme").state == "FAILED"  # not moved
    assert GPU.calls["submit"] == 0


def test_reset_moves_to_a_named_state_and_records_who_and_why(world):
    db, instance = world
    failed_download(db)
    done = reset_training(db, instance, "acme", "AWAIT_CANDIDATE", "artifact fixed", "bo")
    assert (done.after.state, done.after.status, done.after.visits) == (
        "AWAIT_CANDIDATE",
        "waiting",
        {},
    )
    assert done.next_step == f"the next gpu_job_poller tick advances run {KEY} from AWAIT_CANDIDATE"
    assert history(db, "training", "acme")[-1].note == (
        "reset by bo from FAILED to AWAIT_CANDIDATE: artifact fixed"
    )
    assert [r.run_key for r in tick(db, instance).run_requests] == [f"candidate-{KEY}-1"]


def test_unknown_states_missing_runs_and_runs_in_progress_are_refused(world):
    db, instance = world
    with pytest.raises(UnknownState, match="training has no state 'DOWNLOADING'"):
        reset_training(db, instance, "acme", "DOWNLOADING", "why", "bo")
    with pytest.raises(OperatorRefused, match="acme has no training run to repair"):
        reset_training(db, instance, "acme", "POLL_JOB", "why", "bo")
    failed_download(db)
    instance.add_run(
        dg.DagsterRun(
            job_name="__ASSET_JOB",
            run_id="candidate-run",
            status=dg.DagsterRunStatus.STARTED,
            tags={"dagster/partition": "acme", "customer": "acme"},
        )
    )
    with pytest.raises(
        OperatorRefused,
        match=r"acme has Dagster run\(s\) in progress"
        r" \(candidate-run\)",
    ):
        retry_training(db, instance, "acme", "ana")
    with pytest.raises(OperatorRefused, match="in progress"):
        reset_training(db, instance, "acme", "POLL_JOB", "why", "bo")
    with pytest.raises(OperatorRefused, match="reset needs --reason"):
        reset_training(db, instance, "acme", "POLL_JOB", " ", "bo")
    assert pointer(db, "training", "acme").state == "FAILED"
    assert history(db, "training", "acme")[-1].visit != 0  # nothing was recorded


def test_the_cli_resets_and_retries_and_refuses_with_the_reason(platform_env, capsys, tmp_path):
    assert main(["reset", "acme", "--to", "POLLING", "--reason", "x"]) == 2
    assert "training has no state 'POLLING'; its states are INITIAL" in capsys.readouterr().err
    assert not (tmp_path / "home").exists()  # refused before any server or instance
    db = platform_env.database_url("app")
    assert main(["retry", "acme"]) == 2  # the platform exists from here on
    assert "acme has no training run to repair" in capsys.readouterr().err
    failed_download(db)
    assert main(["retry", "acme", "--by", "ana", "--reason", "network back"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"acme: training run {KEY} moved from FAILED to INITIAL by ana; ")
    assert main(["reset", "acme", "--to", "FAILED", "--reason", "abandoned"]) == 0
    ended = pointer(db, "training", "acme")
    assert ended.state == "FAILED" and ended.reason.endswith("from INITIAL to FAILED: abandoned")
    assert ended.reason.startswith("reset by ")  # the OS user when --by is not given
