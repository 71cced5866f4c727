"""Issue 31 on the real platform: a window that cannot be judged, an outage, a flaky download.

- `training_job` launched as the UI launches it (GraphQL, the customer's partition, no pinned
  window) for a customer whose files stopped: refused before any GPU job, the refusal a
  recorded transition of the training machine, `status` saying why, no job, no candidate run;
- the retraining policy's own evaluation (`retrain-assets policy why`) of that customer: a
  deferral that says since when no rows arrived, no decision;
- the GPU service answering 503 for a while (its injected outage) while a customer waits in
  POLL_JOB, then the job's artifact failing its checksum for a while: one history row and
  `last_error` for the outage, a row when it is back, failed downloads spaced by their waits,
  and the run DONE by itself with the job trained once.

The customers are landed and their days published once for the module (`world`).
"""

import datetime as dt
import itertools
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
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


@dataclass(frozen=True)
class World:
    """This module's customers on the shared platform, their days published."""

    platform: RunningPlatform
    stopped: str  # its files stop after 2025-02-07
    flaky: str  # every day to 2025-02-14


@pytest.fixture(scope="module")
def world(shared_platform: RunningPlatform) -> World:
    platform = shared_platform
    tag = uuid.uuid4().hex[:6]
    stopped = TenantSpec(f"stopped-{tag}", "US", stores=2, items=6, seed=8)
    flaky = TenantSpec(f"flaky-{tag}", "US", stores=2, items=3, seed=10)
    land(platform, stopped, 38)
    land(platform, flaky, 45)
    publish_days(platform, "sales", "2025-01-01", "2025-02-14")
    publish_days(platform, "store_day_features", "2025-01-29", "2025-02-14")
    return World(platform, stopped.name, flaky.name)


def test_a_ui_launch_for_a_customer_whose_files_stopped_is_refused_before_any_gpu_job(world):
    platform, name = world.platform, world.stopped
    run_id = launch_training(platform, name, {"num_boost_round": 30})  # no window named
    wait_until(lambda: run_status(platform, run_id) in ("FAILURE", "SUCCESS"), 180, "the run")
    assert run_status(platform, run_id) == "FAILURE"

    state, key, job_id, reason, _ = pointer(platform, name)
    assert (state, job_id) == ("FAILED", None)
    assert reason.startswith("window refused before any GPU job: not enough evidence: ")
    # the default window ends on the latest published day (2025-02-14 unless another test of
    # the shared platform published later days): its holdout holds none of the customer's rows
    assert re.search(rf"holdout \S+ \.\. \S+ has 0 rows of {name} \(needs >= 7\)", reason)
    # where its rows stop: the newest day inside the window, or none at all in a window that
    # starts after it (when another test of the shared platform published later days first)
    assert f"{name}'s newest day with rows is 2025-02-07" in reason or re.search(
        rf"; {name} has no rows in \S+ \.\. \S+; ", reason
    )
    assert re.search(r"the latest window that could be judged: \S+ \.\. 2025-02-07$", reason)
    assert [(s, ok, n) for s, ok, n, _, _ in history(platform, name)] == [
        ("INITIAL", False, "FAILED")
    ]
    assert gpu_call(platform, "GET", "/jobs", params={"idempotency_key": key}).status_code == 404
    runs = platform.graphql(CANDIDATE_RUNS, {"key": key})["runsOrError"]["results"]
    assert runs == []  # no candidate run, so no candidate and no MLflow run
    assert "why: window refused before any GPU job: not enough evidence" in status(platform, name)


def cli(platform: RunningPlatform, *args: str) -> str:
    env = {**up_environment(platform.home, platform.port), **platform.environment()}
    done = subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_policy_defers_a_customer_whose_files_stopped_and_says_since_when(world):
    platform, name = world.platform, world.stopped
    # this module publishes feature days from 2025-01-29: ten days of the customer's rows
    cli(platform, "policy", "set", name, "--min-history-days", "8")
    why = ""

    def deferred() -> bool:
        nonlocal why
        why = cli(platform, "policy", "why", name)
        return "deferred" in why

    wait_until(deferred, 60, f"the policy's verdict on {name}")
    assert f"{name}: deferred: no data from {name} since 2025-02-07 (its newest day with rows" in (
        why
    )
    assert re.search(r"would hold 0 holdout rows of it \(needs >= 7\)", why), why
    assert "no training is decided until its rows arrive" in why


def job_status(platform: RunningPlatform, job_id: str) -> str:
    """Read the job's status from the service's database (its API is down during the outage)."""
    [(found,)] = platform.query("gpu", "SELECT status FROM jobs WHERE id = %s", (job_id,))
    return found


def test_an_outage_then_a_flaky_download_end_done_by_themselves(world):
    platform, name = world.platform, world.flaky
    config = {
        "first_day": "2025-01-29",
        "last_day": "2025-02-14",
        "num_boost_round": 30,
        "checkpoint_every": 10,
        "faults": {"slow_seconds_per_round": 0.3, "on_attempts": [1]},  # about 9 s of training
    }
    run_id = launch_training(platform, name, config)
    wait_until(lambda: run_status(platform, run_id) == "SUCCESS", 180, "training_job's run")
    _, key, job_id, _, _ = pointer(platform, name)
    assert pointer(platform, name)[0] == "POLL_JOB"

    # the service goes away while the job trains; it ends its training meanwhile
    down = gpu_call(platform, "POST", "/faults/outage", json={"seconds": 300})
    assert down.status_code == 200, down.text
    wait_until(
        lambda: (pointer(platform, name)[4] or "").startswith(
            "training service unreachable since "
        ),
        60,
        "the outage recorded on the machine",
    )
    assert "last error: training service unreachable since " in status(platform, name)
    wait_until(lambda: job_status(platform, job_id) == "succeeded", 120, f"GPU job {job_id}")
    model = platform.home / "gpu" / "jobs" / job_id / "model.txt"
    original = model.read_bytes()
    model.write_bytes(original + b"\ncorrupted in transit")  # the artifact store hiccups too
    polls_during_outage = len(history(platform, name))
    assert gpu_call(platform, "POST", "/faults/outage", json={"seconds": 0.01}).status_code == 200

    failed_downloads = (
        "SELECT finished_at, error, note FROM machine_history WHERE machine = 'training'"
        " AND customer = %s AND state = 'DOWNLOAD_SAVE' AND NOT ok ORDER BY id"
    )
    wait_until(
        lambda: len(platform.query("app", failed_downloads, (name,))) >= 2,
        120,
        "two failed downloads",
    )
    model.write_bytes(original)  # the artifact store is back
    wait_until(lambda: pointer(platform, name)[0] == "DONE", 240, "the run to end DONE by itself")

    rows = history(platform, name)
    outage = [r for r in rows if r[0] == "POLL_JOB" and not r[1]]
    assert len(outage) == 1  # one row for the whole outage, one visit spent
    assert outage[0][3].startswith("training service unreachable since ")
    back = [r for r in rows if (r[4] or "").startswith("training service reachable again")]
    assert len(back) == 1
    assert rows.index(back[0]) == rows.index(outage[0]) + 1  # no row while it was away
    assert len(rows) >= polls_during_outage
    failures = platform.query("app", failed_downloads, (name,))
    assert 2 <= len(failures) < 5
    assert all("sha256" in error for _, error, _ in failures)
    assert all("next try of DOWNLOAD_SAVE (visit" in note for _, _, note in failures)
    gaps = [(b[0] - a[0]).total_seconds() for a, b in itertools.pairwise(failures)]
    assert all(gap >= 1.5 for gap in gaps), gaps  # waited, not back to back
    last_error = pointer(platform, name)[4] or ""  # the last download's, the outage's cleared
    assert last_error.startswith("ArtifactCorrupt: "), last_error
    job = gpu_call(platform, "GET", f"/jobs/{job_id}").json()
    assert job["attempt"] == 1 and len(job["runs"]) == 1  # trained once
    assert gpu_call(platform, "GET", "/jobs", params={"idempotency_key": key}).json()["id"] == (
        job_id
    )
    shown = status(platform, name)
    assert name in shown and "DONE" in shown
