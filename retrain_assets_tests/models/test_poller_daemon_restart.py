"""The real dagster-daemon killed while a customer waits in POLL_JOB, then started again."""

import datetime as dt
import os
import signal
import uuid
from pathlib import Path

import dagster as dg
import pytest

from retrain_assets.customers import CUSTOMERS
from retrain_assets.definitions import FEATURES_JOB, build_definitions
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.machines.store import history, pointer
from retrain_assets.models.candidates import CandidateTable
from retrain_assets.models.gate_results import latest_gate_result
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.runtime.environment import child_environment, prepare_dagster_home, repo_file
from retrain_assets.settings import storage_root
from retrain_assets_tests.gpu.service_process import TOKEN, running_service
from retrain_assets_tests.models.world import START, TENANTS
from retrain_assets_tests.support.processes import start_daemon, stop_group
from retrain_assets_tests.support.waiting import wait_until

pytestmark = pytest.mark.system
CUSTOMER = TENANTS[0].name


def candidate_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    """Return the runs the poller launched: candidate, its gate and the registration."""
    return [
        run
        for run in instance.get_runs()
        if run.asset_selection
        and {k.to_user_string() for k in run.asset_selection}
        == {"model_candidate", "registered_model"}
    ]


def poll_visits(db: str) -> int:
    return sum(1 for row in history(db, "training", CUSTOMER) if row.state == "POLL_JOB")


def wait_for(condition, seconds: float, what: str, log: Path) -> None:
    wait_until(condition, seconds, what, detail=lambda: f"daemon log:\n{log.read_text()[-4000:]}")


def test_a_killed_daemon_resumes_the_wait_and_fetches_exactly_one_candidate(
    tmp_path, pg_server, app_db, dagster_db, mlflow_uri, monkeypatch
):
    home = tmp_path / "home"
    monkeypatch.setenv("RETRAIN_HOME", str(home))
    monkeypatch.setenv("RETRAIN_PG_URL", pg_server.url)
    monkeypatch.setenv("RETRAIN_POLL_INTERVAL_SECONDS", "2")
    monkeypatch.setenv("RETRAIN_LANDING_AUTOMATION", "off")  # features are published below
    monkeypatch.setenv("RETRAIN_CODE_COMMIT", f"test-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    for name in ("RETRAIN_LANDING_URL", "RETRAIN_STORAGE_URL", "RETRAIN_APP_PG_URL"):
        monkeypatch.delenv(name, raising=False)
    with running_service(pg_url=pg_server.url, home=tmp_path / "gpu-home") as service:
        monkeypatch.setenv("RETRAIN_GPU_URL", service.url)
        monkeypatch.setenv("RETRAIN_GPU_TOKEN", TOKEN)
        folders = prepare_dagster_home(repo_file("dagster.yaml"))
        for key, value in child_environment(pg_server, folders).items():
            monkeypatch.setenv(key, value)
        for spec in TENANTS:
            days = [START + dt.timedelta(days=i) for i in range(45)]
            land_tenant(str(home / "landing"), spec, days)

        with dg.DagsterInstance.get() as instance:
            instance.add_dynamic_partitions(CUSTOMERS.name, [s.name for s in TENANTS])
            features = (
                build_definitions()
                .resolve_job_def(FEATURES_JOB)
                .execute_in_process(
                    instance=instance,
                    tags={
                        "dagster/asset_partition_range_start": "2025-01-01",
                        "dagster/asset_partition_range_end": "2025-02-14",
                    },
                )
            )
            assert features.success
            config = {
                "ops": {
                    "training_job": {
                        "config": {
                            "first_day": "2025-01-01",
                            "last_day": "2025-02-14",
                            "num_boost_round": 40,
                            "checkpoint_every": 10,
                            # 80 s of training: the daemon starts after the submit, and on
                            # a loaded machine (4 test workers, load 15) its first poll came
                            # after a 12 s job had finished, past the POLL_JOB to kill it in
                            "faults": {"slow_seconds_per_round": 2.0, "on_attempts": [1]},
                        }
                    }
                }
            }
            submitted = dg.materialize(
                [training_job],
                partition_key=CUSTOMER,
                run_config=config,
                instance=instance,
                resources=build_definitions().resources,
            )
            key = (
                submitted.asset_materializations_for_node("training_job")[0]
                .metadata["run_key"]
                .value
            )
            db = os.environ["RETRAIN_APP_PG_URL"]
            before = poll_visits(db)

            log = tmp_path / "daemon.log"
            daemon = start_daemon(log)
            try:
                wait_for(lambda: poll_visits(db) > before, 90, "a poll by the daemon", log)
                stop_group(daemon, signal.SIGKILL)
                assert pointer(db, "training", CUSTOMER).state == "POLL_JOB"
                daemon = start_daemon(log)
                wait_for(
                    lambda: pointer(db, "training", CUSTOMER).state == "DONE",
                    300,
                    "the candidate fetched by a daemon-launched run",
                    log,
                )
                wait_for(
                    lambda: any(r.is_finished for r in candidate_runs(instance)),
                    120,
                    "the candidate run (gate and registration included) to finish",
                    log,
                )
            finally:
                stop_group(daemon)

            runs = candidate_runs(instance)
            assert len(runs) == 1
            assert runs[0].tags["customer"] == CUSTOMER
            assert CandidateTable(db, storage_root()).count_for(key) == 1
            job = service.client().find(key)
            assert job is not None and len(service.job(job.id)["runs"]) == 1

            # The daemon's run gated the candidate and registered it only on a pass.
            verdict = latest_gate_result(db, key)
            assert verdict is not None and verdict.dagster_run_id == runs[0].run_id
            versions = MlflowRegistry(mlflow_uri).versions_of(CUSTOMER, key)
            assert len(versions) == (1 if verdict.passed else 0)
