"""`retrain-assets retry` on the running platform: a failed download costs a download again.

The real daemon runs the poller and launches the candidate runs; the artifact is corrupted on
the GPU service's disk so every download of the first candidate run fails its sha256 check and
the run ends FAILED. Repaired, `retry` re-enters the run: the daemon's next tick finds the
succeeded job, requests the next attempt's candidate run (a new Dagster run key: the first was
used) and the run ends DONE through its gate. The job is trained once.
"""

import datetime as dt
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets_tests.support.platform import RunningPlatform, up_environment
from retrain_assets_tests.support.ui_actions import LAUNCH_RUN, publish_days, wait_for_run
from retrain_assets_tests.support.waiting import wait_until

pytestmark = pytest.mark.system

CLI = str(Path(sys.executable).parent / "retrain-assets")
START = dt.date(2025, 1, 1)
SENSOR = """
query Sensor($selector: SensorSelector!) { sensorOrError(sensorSelector: $selector) {
  ... on Sensor { id } } }
"""
STOP = "mutation Stop($id: String!) { stopSensor(id: $id) { __typename } }"
START_SENSOR = """
mutation Start($selector: SensorSelector!) { startSensor(sensorSelector: $selector) {
  __typename } }
"""
POLLER = {
    "repositoryLocationName": "retrain_assets",
    "repositoryName": "__repository__",
    "sensorName": "gpu_job_poller",
}
CANDIDATE_RUNS = """
query Runs($key: String!) { runsOrError(filter: {tags: [{key: "retrain/run_key", value: $key}]}) {
  ... on Runs { results { runId status tags { key value } } } } }
"""


def machine(platform: RunningPlatform, customer: str) -> tuple | None:
    rows = platform.query(
        "app",
        "SELECT state, run_key, payload->>'job_id', reason FROM machine_pointers"
        " WHERE machine = 'training' AND customer = %s",
        (customer,),
    )
    return rows[0] if rows else None


def gpu_job(platform: RunningPlatform, job_id: str) -> dict:
    response = requests.get(
        f"{platform.gpu_url()}/jobs/{job_id}",
        headers={"Authorization": f"Bearer {platform.gpu_token()}"},
        timeout=30,
    )
    response.raise_for_status()
    return response.json()


def train(platform: RunningPlatform, customer: str, first: str, last: str) -> str:
    """Launch training_job for the customer from the launchpad, with its days; wait for it."""
    config = {
        "ops": {
            "training_job": {
                "config": {
                    "first_day": first,
                    "last_day": last,
                    "num_boost_round": 30,
                    "checkpoint_every": 10,
                }
            }
        }
    }
    params = {
        "selector": {
            "repositoryLocationName": "retrain_assets",
            "repositoryName": "__repository__",
            "pipelineName": "__ASSET_JOB",
            "assetSelection": [{"path": ["training_job"]}],
        },
        "runConfigData": config,
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": customer}]},
    }
    launched = platform.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    wait_for_run(platform, run_id)
    return run_id


def test_retry_after_corrupted_downloads_costs_a_download_not_a_retrain(shared_platform):
    platform = shared_platform
    spec = TenantSpec(f"retry-{uuid.uuid4().hex[:6]}", "US", stores=2, items=3, seed=5)
    name = spec.name
    land_tenant(
        str(platform.home / "landing"), spec, [START + dt.timedelta(days=i) for i in range(45)]
    )
    partitions = "SELECT partition FROM dynamic_partitions WHERE partitions_def_name = 'customers'"
    wait_until(lambda: (name,) in platform.query("dagster", partitions), 90, f"{name} discovered")
    publish_days(platform, "sales", "2025-01-01", "2025-02-14")
    publish_days(platform, "store_day_features", "2025-01-29", "2025-02-14")

    sensor_id = platform.graphql(SENSOR, {"selector": POLLER})["sensorOrError"]["id"]
    assert platform.graphql(STOP, {"id": sensor_id})["stopSensor"]["__typename"] == (
        "StopSensorMutationResult"
    )
    try:
        train(platform, name, "2025-01-29", "2025-02-14")
        state, key, job_id, _ = machine(platform, name)
        assert state == "POLL_JOB"
        wait_until(
            lambda: gpu_job(platform, job_id)["status"] == "succeeded", 120, f"GPU job {job_id}"
        )
        model = platform.home / "gpu" / "jobs" / job_id / "model.txt"
        original = model.read_bytes()
        model.write_bytes(original + b"\ncorrupted in transit")
    finally:
        started = platform.graphql(START_SENSOR, {"selector": POLLER})["startSensor"]
        assert started["__typename"] == "Sensor", started
    wait_until(
        lambda: machine(platform, name)[0] == "FAILED", 180, "the candidate run's downloads to fail"
    )
    assert "DOWNLOAD_SAVE would exceed its budget of 5" in machine(platform, name)[3]

    model.write_bytes(original)
    env = {**up_environment(platform.home, platform.port), **platform.environment()}
    done = subprocess.run(
        [CLI, "retry", name, "--by", "ops", "--reason", "artifact restored"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{name}: training run {key} moved from FAILED to INITIAL by ops")
    assert f"GPU job {job_id}: a succeeded job is downloaded (not retrained)" in done.stdout
    wait_until(lambda: machine(platform, name)[0] == "DONE", 240, "the retried run to end DONE")

    job = gpu_job(platform, job_id)
    assert job["attempt"] == 1 and len(job["runs"]) == 1  # trained once

    def attempts() -> list[tuple[str, str]]:
        runs = platform.graphql(CANDIDATE_RUNS, {"key": key})["runsOrError"]["results"]
        return sorted(
            (
                next(t["value"] for t in r["tags"] if t["key"] == "retrain/handoff_attempt"),
                r["status"],
            )
            for r in runs
        )

    # DONE comes as soon as the registration is recorded; the run's last check may still run
    wait_until(lambda: attempts()[-1][1] != "STARTED", 60, "the second candidate run to end")
    assert attempts() == [("1", "FAILURE"), ("2", "SUCCESS")]
    notes = platform.query(
        "app",
        "SELECT state, next_state, note FROM machine_history WHERE machine = 'training'"
        " AND customer = %s ORDER BY id",
        (name,),
    )
    retry = [row for row in notes if row[2] and row[2].startswith("retry by ops")]
    assert [(s, n) for s, n, _ in retry] == [("FAILED", "INITIAL")]
    after = notes[notes.index(retry[0]) + 1 :]
    assert [(s, n) for s, n, _ in after[:3]] == [
        ("INITIAL", "CHECK_LAST_TRAIN"),
        ("CHECK_LAST_TRAIN", "AWAIT_CANDIDATE"),
        ("AWAIT_CANDIDATE", "AWAIT_CANDIDATE"),
    ]
