"""Slots and crashes of the service itself: queued jobs wait; a killed service's job resumes."""

import time
from pathlib import Path

import psutil
import pytest

from retrain_assets.store.server import PostgresServer
from retrain_assets_tests.gpu.service_process import ServiceProcess, training_spec
from retrain_assets_tests.support.waiting import patience

pytestmark = pytest.mark.system


def test_jobs_wait_for_a_slot_and_resume_after_the_service_is_killed(
    pg_server: PostgresServer, tmp_path: Path, dataset: Path, baseline_sha256: str
) -> None:
    service = ServiceProcess(pg_url=pg_server.url, home=tmp_path / "home", slots=1)
    service.start()
    try:
        slow = training_spec(dataset, faults={"slow_seconds_per_round": 0.08})
        first = service.submit("slow-first", slow).json()["id"]
        second = service.submit("waits-for-a-slot", training_spec(dataset)).json()["id"]
        running = service.wait_for(first, lambda job: job["status"] == "running")
        assert service.job(second)["status"] == "queued"
        assert service.call("GET", "/healthz").json()["busy_slots"] == 1

        third = service.submit("cancelled-while-queued", training_spec(dataset)).json()["id"]
        cancelled = service.client().cancel(third)
        assert cancelled.status.value == "cancelled"  # queued: cancelled at once

        running = service.wait_for(first, lambda job: (job["last_checkpoint_round"] or 0) >= 10)
        assert service.job(second)["status"] == "queued"  # still no free slot
        worker_pid = running["worker_pid"]
        service.kill()
        # The worker notices its service is gone and exits instead of training on alone.
        assert _gone(worker_pid, seconds=5), f"worker {worker_pid} outlived its service"

        service.start()  # same database and data folder: the job resumes from its checkpoint
        done = service.wait_for(first)
        assert done["status"] == "succeeded", done
        assert done["attempt"] == 1
        interrupted, resumed = done["runs"]
        assert interrupted["outcome"] == "interrupted"
        # It resumed from the checkpoint it had reached (at least the one seen before the
        # kill; checkpoints fall on multiples of checkpoint_every=10), not from scratch.
        assert resumed["started_from_round"] >= running["last_checkpoint_round"] >= 10
        assert resumed["started_from_round"] % 10 == 0
        artifact = service.call("GET", f"/jobs/{first}/artifact").json()
        assert artifact["sha256"] == baseline_sha256

        assert service.wait_for(second)["status"] == "succeeded"
        assert service.job(third)["status"] == "cancelled"
        assert service.job(third)["runs"] == []
    finally:
        assert service.stop() == 0, service.log()


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + patience(seconds)
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.05)
    return False
