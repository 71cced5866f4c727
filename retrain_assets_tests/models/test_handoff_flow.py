"""The hand-off end to end: a candidate run that fails on MLflow is requested again and gated.

Real GPU service, real MLflow server, the Postgres-backed instance; each request is executed
as the daemon would launch it and the poller is ticked in between.
"""

import pytest

from retrain_assets.machines.store import history, pointer
from retrain_assets.models.candidates import CandidateTable
from retrain_assets.models.gate_results import latest_gate_result
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.settings import storage_root
from retrain_assets_tests.models.flow import (
    CUSTOMER,
    STRONG,
    execute,
    materialize,
    poll_until_requested,
    tick,
    train_config,
)
from retrain_assets_tests.support.processes import free_port

pytestmark = pytest.mark.system


def test_a_candidate_run_that_fails_after_the_download_is_requested_again_and_gated(
    model_world, monkeypatch
):
    instance, service, db = model_world.instance, model_world.service, model_world.db
    registry = MlflowRegistry(model_world.mlflow_uri)
    submitted = materialize(instance, [training_job], train_config(**STRONG))
    key = submitted.asset_materializations_for_node("training_job")[0].metadata["run_key"].value
    first = poll_until_requested(instance, seconds=120)
    assert first.run_key == f"candidate-{key}-1"

    with monkeypatch.context() as down:  # MLflow unreachable for this run only
        down.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
        down.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        down.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
        failed = execute(instance, first)  # then one tick, as the daemon's next one
    assert not failed.success
    assert CandidateTable(db, storage_root()).count_for(key) == 1  # downloaded before MLflow
    after = pointer(db, "training", CUSTOMER)
    assert (after.state, after.payload["handoff_attempt"]) == ("AWAIT_GATE", 2)
    note = history(db, "training", CUSTOMER)[-1].note
    assert note.startswith(
        f"candidate-{key}-1 (run {failed.run_id}) ended FAILURE before the gate and the "
        "registration was recorded: "
    )
    assert f"; candidate-{key}-2 (attempt 2 of 3) to be requested at " in note
    # the failure names its step, customer, run key and window, not only the library's words
    assert (
        "recording the candidate in MLflow (forecast plot on the holdout) for alpha-us, run key "
        f"{key}, snapshot 2025-01-01 .. 2025-02-19: "
    ) in note
    [second] = tick(instance).run_requests  # a tick evaluated again asks for the same attempt
    assert second.run_key == f"candidate-{key}-2"

    assert execute(instance, second).success
    done = pointer(db, "training", CUSTOMER)
    [version] = registry.versions_of(CUSTOMER, key)
    assert done.state == "DONE"
    assert done.reason.startswith(f"registered as version {version.version}; gate passed: ")
    assert latest_gate_result(db, key).passed
    assert len(registry.runs_of(CUSTOMER, key)) == 1
    assert tick(instance).run_requests == []
    job = service.client().find(key)
    assert job.attempt == 1 and len(service.job(job.id)["runs"]) == 1  # trained once
