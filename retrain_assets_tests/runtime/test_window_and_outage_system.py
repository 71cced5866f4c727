"""Issue 31 on the real platform: a window that cannot be judged, and a service outage.

- `training_job` launched as the UI launches it (GraphQL, the customer's partition, no pinned
  window) for a customer whose files stopped: refused before any GPU job, the refusal a
  recorded transition of the training machine, `status` saying why, no job, no candidate run;
- the GPU service answering 503 for a while (its injected outage) while a customer waits in
  POLL_JOB: one history row and `last_error` for the outage, a row when it is back, the job
  trained once and the run DONE by itself.
"""

import datetime as dt
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets_tests.support.platform import RunningPlatform, up_environment
from retrain_assets_tests.support.ui_actions import LAUNCH_RUN, RUN_STATUS, publish_days
from retrain_assets_tests.support.waiting import wait_until

pytestmark = pytest.mark.system

CLI = str(Path(sys.executable).parent / "retrain-assets")
START = dt.date(2025, 1, 1)
CANDIDATE_RUNS = """
query Runs($key: String!) { runsOrError(filter: {tags: [{key: "retrain/run_key", value: $key}]}) {
  ... on Runs { results { runId } } } }
"""


def launch_training(platform: RunningPlatform, customer: str, config: dict) -> str:
    """Launch training_job for the customer's partition as the launchpad does; return the run id."""
    params = {
        "selector": {
            "repositoryLocationName": "retrain_assets",
            "repositoryName": "__repository__",
            "pipelineName": "__ASSET_JOB",
            "assetSelection": [{"path": ["training_job"]}],
        },
        "runConfigData": {"ops": {"training_job": {"config": config}}},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": customer}]},
    }
    launched = platform.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def run_status(platform: RunningPlatform, run_id: str) -> str:
    return platform.graphql(RUN_STATUS, {"id": run_id})["runOrError"]["status"]


def pointer(platform: RunningPlatform, customer: str) -> tuple:
    [row] = platform.query(
        "app",
        "SELECT state, run_key, payload->>'job_id', reason, last_error FROM machine_pointers"
        " WHERE machine = 'training' AND customer = %s",
        (customer,),
    )
    return row


def history(platform: RunningPlatform, customer: str) -> list[tuple]:
    return platform.query(
        "app",
        "SELECT state, ok, next_state, error, note FROM machine_history"
        " WHERE machine = 'training' AND customer = %s ORDER BY id",
        (customer,),
    )


def gpu_call(platform: RunningPlatform, method: str, path: str, **kwargs) -> requests.Response:
    return requests.request(
        method,
        f"{platform.gpu_url()}{path}",
        headers={"Authorization": f"Bearer {platform.gpu_token()}"},
        timeout=30,
        **kwargs,
    )


def status(platform: RunningPlatform, customer: str) -> str:
    env = {**up_environment(platform.home, platform.port), **platform.environment()}
    done = subprocess.run(
        [CLI, "status", "--customer", customer],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def land(platform: RunningPlatform, spec: TenantSpec, days: int) -> None:
    land_tenant(
        str(platform.home / "landing"), spec, [START + dt.timedelta(days=i) for i in range(days)]
    )
    partitions = "SELECT partition FROM dynamic_partitions WHERE partitions_def_name = 'customers'"
    wait_until(
        lambda: (spec.name,) in platform.query("dagster", partitions), 90, f"{spec.name} found"
    )


def test_a_ui_launch_for_a_customer_whose_files_stopped_is_refused_before_any_gpu_job(
    shared_platform,
):
    platform = shared_platform
    tag = uuid.uuid4().hex[:6]
    stopped = TenantSpec(f"stopped-{tag}", "US", stores=2, items=6, seed=8)
    going = TenantSpec(f"going-{tag}", "US", stores=2, items=3, seed=9)
    land(platform, stopped, 38)  # its files stop after 2025-02-07
    land(platform, going, 45)  # the others go on to 2025-02-14
    publish_days(platform, "sales", "2025-01-01", "2025-02-14")
    publish_days(platform, "store_day_features", "2025-01-29", "2025-02-14")

    run_id = launch_training(platform, stopped.name, {"num_boost_round": 30})  # no window named
    wait_until(lambda: run_status(platform, run_id) in ("FAILURE", "SUCCESS"), 180, "the run")
    assert run_status(platform, run_id) == "FAILURE"

    state, key, job_id, reason, _ = pointer(platform, stopped.name)
    assert (state, job_id) == ("FAILED", None)
    assert reason.startswith("window refused before any GPU job: not enough evidence: ")
    # the default window ends on the latest published day (2025-02-14 unless another test of
    # the shared platform published later days): its holdout holds none of the customer's rows
    assert re.search(rf"holdout \S+ \.\. \S+ has 0 rows of {stopped.name} \(needs >= 7\)", reason)
    assert f"{stopped.name}'s newest day with rows is 2025-02-07" in reason
    assert re.search(r"the latest window that could be judged: \S+ \.\. 2025-02-07$", reason)
    assert [(s, ok, n) for s, ok, n, _, _ in history(platform, stopped.name)] == [
        ("INITIAL", False, "FAILED")
    ]
    assert gpu_call(platform, "GET", "/jobs", params={"idempotency_key": key}).status_code == 404
    runs = platform.graphql(CANDIDATE_RUNS, {"key": key})["runsOrError"]["results"]
    assert runs == []  # no candidate run, so no candidate and no MLflow run
    assert "why: window refused before any GPU job: not enough evidence" in status(
        platform, stopped.name
    )


def test_a_service_outage_during_poll_job_is_recorded_once_and_ends_by_itself(shared_platform):
    platform = shared_platform
    spec = TenantSpec(f"outage-{uuid.uuid4().hex[:6]}", "US", stores=2, items=3, seed=10)
    land(platform, spec, 45)
    publish_days(platform, "sales", "2025-01-01", "2025-02-14")
    publish_days(platform, "store_day_features", "2025-01-29", "2025-02-14")
    config = {
        "first_day": "2025-01-29",
        "last_day": "2025-02-14",
        "num_boost_round": 40,
        "checkpoint_every": 10,
        "faults": {"slow_seconds_per_round": 0.4, "on_attempts": [1]},  # about 16 s of training
    }
    run_id = launch_training(platform, spec.name, config)
    wait_until(lambda: run_status(platform, run_id) == "SUCCESS", 180, "training_job's run")
    assert pointer(platform, spec.name)[0] == "POLL_JOB"

    down = gpu_call(platform, "POST", "/faults/outage", json={"seconds": 12})
    assert down.status_code == 200, down.text
    wait_until(
        lambda: (pointer(platform, spec.name)[4] or "").startswith(
            "training service unreachable since "
        ),
        60,
        "the outage recorded on the machine",
    )
    assert "last error: training service unreachable since " in status(platform, spec.name)
    wait_until(lambda: pointer(platform, spec.name)[0] == "DONE", 300, "the run to end DONE")

    rows = history(platform, spec.name)
    outage = [r for r in rows if r[0] == "POLL_JOB" and not r[1]]
    assert len(outage) == 1  # one row for the whole outage, one visit spent
    assert outage[0][3].startswith("training service unreachable since ")
    back = [r for r in rows if (r[4] or "").startswith("training service reachable again")]
    assert len(back) == 1
    _state, key, job_id, _, last_error = pointer(platform, spec.name)
    assert last_error is None
    job = gpu_call(platform, "GET", f"/jobs/{job_id}").json()
    assert job["attempt"] == 1 and len(job["runs"]) == 1  # trained once
    assert gpu_call(platform, "GET", "/jobs", params={"idempotency_key": key}).json()["id"] == (
        job_id
    )
