"""The Slurm backend against a real one-node cluster: jobs, idempotency, bad input, faults.

Every test here shares the session's cluster (`slurm_cluster`, started once: all of them are in
this one file, so pytest-xdist runs them in one worker). Each test has its own shared-storage
folder, and its own run keys, so the jobs of one never meet another's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import shutil
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from retrain_assets import settings
from retrain_assets.automation.gpu_job_poller import gpu_job_poller
from retrain_assets.customers import CUSTOMERS
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.gpu.backends import slurm_backend
from retrain_assets.gpu.protocol import Job, JobStatus
from retrain_assets.gpu.slurm import backend as backend_module
from retrain_assets.gpu.slurm import states, stuck
from retrain_assets.gpu.slurm.backend import ArtifactMissing, SlurmBackend
from retrain_assets.gpu.slurm.cluster import OPENAPI_PLUGIN, SlurmCluster
from retrain_assets.gpu.slurm.cluster_config import PARTITION
from retrain_assets.gpu.slurm.job_files import BadRunKey, JobFiles, job_name
from retrain_assets.gpu.slurm.rest import SlurmRest, SlurmRestError
from retrain_assets.machines import advance
from retrain_assets.machines.outage import is_unreachable
from retrain_assets.machines.store import history, pointer
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets.models.candidates import CandidateTable
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.models.resources import GpuServiceResource, training_services
from retrain_assets.models.run_key import code_commit
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.settings import storage_root
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets_tests.gpu.service_process import training_spec
from retrain_assets_tests.models.flow import (
    CUSTOMER,
    materialize,
    poll_until_requested,
    tick,
    train_config,
)
from retrain_assets_tests.models.world import DAYS, START, TENANTS
from retrain_assets_tests.support.in_process import publish_feature_range
from retrain_assets_tests.support.waiting import wait_until

pytestmark = pytest.mark.system
SLOW = {"faults": {"slow_seconds_per_round": 0.5, "on_attempts": [1]}}  # 40 rounds: ~20 s
# ~50 s: the training slurmd's death leaves running must not end in the ~25 s before the
# requeue; the requeued job is the same attempt, so it crawls too
CRAWL = {"faults": {"slow_seconds_per_round": 1.2, "on_attempts": [1]}}


def new_key() -> str:
    return uuid.uuid4().hex[:16]


def slurm_jobs_of(slurm: SlurmBackend, key: str) -> list[int]:
    """Return the ids of every job the cluster knows for the run key (finished ones included)."""
    return sorted(int(j["job_id"]) for j in slurm.rest.jobs() if j["name"] == job_name(key))


def wait_for(
    slurm: SlurmBackend, job_id: str, done: Callable[[Job], bool], seconds: float, what: str
) -> Job:
    """Poll the job (one batched status call each time) until `done(job)`; return it."""
    seen: list[Job] = []

    def reached() -> bool:
        seen.append(slurm.statuses([job_id])[job_id])
        return bool(done(seen[-1]))

    wait_until(reached, seconds, what, detail=lambda: repr(seen[-1:]))
    return seen[-1]


def test_a_job_trains_the_reference_model_and_every_retry_attaches_to_it(
    slurm: SlurmBackend, dataset: Path, baseline_sha256: str, tmp_path: Path
) -> None:
    key = new_key()
    spec = training_spec(dataset)
    first = slurm.submit(key, spec)
    assert first.status in (JobStatus.QUEUED, JobStatus.RUNNING) and first.attempt == 1
    assert slurm.submit(key, spec).id == first.id  # a retry attaches
    assert slurm.find(key) is not None and slurm.find(key).id == first.id  # type: ignore[union-attr]
    done = wait_for(slurm, first.id, lambda j: j.status.finished, 90, "the job to finish")
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert (done.rounds_done, done.total_rounds, done.last_checkpoint_round) == (40, 40, 40)
    artifact = slurm.download(first.id, tmp_path / "downloaded")
    # the same trainer as the reference service: the same bytes as training it here
    assert artifact.sha256 == baseline_sha256
    assert artifact.path.read_bytes() == (slurm.storage / key / "model.txt").read_bytes()
    assert artifact.metrics["rounds"] == 40.0
    # a finished key is returned, never trained again; Slurm knows one job for it
    assert slurm.submit(key, spec).id == first.id
    assert slurm_jobs_of(slurm, key) == [int(first.id.split(":")[0])]


def test_a_submit_interrupted_before_it_recorded_the_id_attaches_to_that_job(
    slurm: SlurmBackend, dataset: Path
) -> None:
    key = new_key()
    held = SlurmBackend(slurm.rest, slurm.storage, dataclasses.replace(slurm.options, hold=True))
    first = held.submit(key, training_spec(dataset))
    files = JobFiles.of(slurm.storage, key)
    # as if the platform died between Slurm's answer and recording the id
    (files.folder / "attempts").unlink()
    (files.folder / "submitting").write_text("attempt 1\n")
    again = slurm.submit(key, training_spec(dataset))
    assert again.id == first.id and again.status is JobStatus.QUEUED  # found by name, held
    assert "reason JobHeldUser" in (again.detail or "")
    assert (files.folder / "attempts").read_text().split() == [first.id.split(":")[0]]
    assert slurm_jobs_of(slurm, key) == [int(first.id.split(":")[0])]
    slurm.cancel(first.id)


def counted_calls(rest: SlurmRest, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count the client's `GET /job/{id}` ("job") and `GET /jobs` ("jobs"); each still asks."""
    calls: Counter[str] = Counter()

    def spy(name: str) -> Callable[..., Any]:
        real = getattr(rest, name)

        def call(*args: Any) -> Any:
            calls[name] += 1
            return real(*args)

        return call

    for name in ("job", "jobs"):
        monkeypatch.setattr(rest, name, spy(name))
    return calls


def test_a_few_statuses_are_asked_by_id_many_in_one_listing_and_a_forgotten_job_by_its_folder(
    slurm: SlurmBackend, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = [slurm.submit(new_key(), training_spec(dataset, **SLOW)) for _ in range(3)]
    for job in held:
        slurm.cancel(job.id)
    forgotten = f"999999:{new_key()}"
    ids = [j.id for j in held] + [forgotten]
    listings: list[dict[str, Job]] = []

    def all_ended() -> bool:
        # a cancelled job that is still running shows RUNNING until Slurm's KillWait (5 s here)
        listings.append(slurm.statuses(ids))
        return all(listings[-1][j.id].status.finished for j in held)

    wait_until(all_ended, 30, "the three cancelled jobs to end", detail=lambda: repr(listings[-1:]))
    calls = counted_calls(slurm.rest, monkeypatch)
    found = slurm.statuses(ids)
    assert calls == Counter(job=len(ids))  # under BY_ID_LIMIT: only the asked jobs, by id
    assert {j.status for j in (found[j.id] for j in held)} == {JobStatus.CANCELLED}
    assert "Slurm CANCELLED: cancelled" in (found[held[0].id].error or "")
    lost = found[forgotten]
    assert lost.status is JobStatus.FAILED
    assert "Slurm no longer knows job 999999" in (lost.error or "")
    assert "looks the run key up again" in (lost.error or "")
    assert slurm.get(forgotten).status is JobStatus.FAILED  # one id alone: the same judgement

    monkeypatch.setattr(backend_module, "BY_ID_LIMIT", 1)  # the batch is now above the limit
    calls.clear()
    assert slurm.statuses(ids) == found  # the one listing judges every job alike
    assert calls == Counter(jobs=1)


def test_bad_input_is_refused_with_its_reason_and_queues_no_job(
    slurm: SlurmBackend, dataset: Path
) -> None:
    before = len(slurm.rest.jobs())
    with pytest.raises(BadRunKey, match="cannot name a Slurm job"):
        slurm.submit("key with spaces;rm", training_spec(dataset))
    refused_spec = r"run key \w+: params.num_boost_round: Input should be greater"
    with pytest.raises(ValueError, match=refused_spec):
        slurm.submit(new_key(), training_spec(dataset, params={"num_boost_round": 0}))
    with pytest.raises(ValueError, match="is not '<slurm job id>:<run key>'"):
        slurm.get("not-an-id")
    assert slurm.statuses(["not-an-id"]) == {}  # left out of the batch, not failing it
    gpu = SlurmBackend(slurm.rest, slurm.storage, dataclasses.replace(slurm.options, gres="gpu:1"))
    with pytest.raises(SlurmRestError, match="POST /job/submit") as refused:
        gpu.submit(new_key(), training_spec(dataset))  # this node has no GPU
    assert not is_unreachable(refused.value)  # an answer: the machine records it as a failure
    assert len(slurm.rest.jobs()) == before


def test_a_job_that_exits_0_without_a_result_has_no_artifact_and_says_so(
    slurm: SlurmBackend, dataset: Path, tmp_path: Path
) -> None:
    hollow = SlurmBackend(
        slurm.rest, slurm.storage, dataclasses.replace(slurm.options, python="/bin/true")
    )
    key = new_key()
    job = hollow.submit(key, training_spec(dataset))
    done = wait_for(hollow, job.id, lambda j: j.status.finished, 60, "the empty job to end")
    assert done.status is JobStatus.FAILED
    assert "Slurm COMPLETED: exited 0; but it wrote no result" in (done.error or "")
    with pytest.raises(ArtifactMissing, match="left no model and result"):
        hollow.download(job.id, tmp_path / "nothing")


def test_an_operator_scancel_ends_the_job_and_the_resubmission_resumes_its_checkpoint(
    slurm: SlurmBackend, slurm_cluster: SlurmCluster, dataset: Path, baseline_sha256: str
) -> None:
    key = new_key()
    spec = training_spec(dataset, **SLOW)
    job = slurm.submit(key, spec)
    wait_for(
        slurm, job.id, lambda j: (j.last_checkpoint_round or 0) >= 10, 90, "a first checkpoint"
    )
    slurm_id = job.id.split(":")[0]
    subprocess.run(["scancel", slurm_id], env=slurm_cluster.env(), check=True, timeout=30)
    cancelled = wait_for(slurm, job.id, lambda j: j.status.finished, 60, "the cancelled job to end")
    assert cancelled.status is JobStatus.CANCELLED
    assert "Slurm CANCELLED" in (cancelled.error or "")
    again = slurm.submit(key, spec)  # JOB_FAILED's resubmission: a new job, the same folder
    assert again.id != job.id and again.attempt == 2
    done = wait_for(slurm, again.id, lambda j: j.status.finished, 90, "the resubmitted job")
    assert done.status is JobStatus.SUCCEEDED, done.error
    result = json.loads(JobFiles.of(slurm.storage, key).result.read_text())
    assert result["resumed_from_round"] >= 10  # the checkpoint, not round 0
    assert result["sha256"] == baseline_sha256  # and the same model as an uninterrupted run
    assert len(slurm_jobs_of(slurm, key)) == 2  # never two at once: the second after the first


@pytest.fixture
def slurm_world(
    tmp_path: Path,
    app_db: str,
    dagster_instance: dg.DagsterInstance,
    mlflow_uri: str,
    slurm_cluster: SlurmCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[dg.DagsterInstance]:
    """The model side's world (models/conftest.py's `model_world`) with Slurm as the backend.

    `code_commit` is cached per process: cleared around the test, so the commit set here makes
    this test's run keys its own (two tests of one key would share Slurm jobs by name).
    """
    home = tmp_path / "home"
    for spec in TENANTS:
        land_tenant(
            str(home / "landing"), spec, [START + dt.timedelta(days=i) for i in range(DAYS)]
        )
    monkeypatch.setenv("RETRAIN_HOME", str(home))
    monkeypatch.setenv("RETRAIN_APP_PG_URL", app_db)
    monkeypatch.setenv("RETRAIN_CODE_COMMIT", f"test-{uuid.uuid4().hex[:8]}")
    code_commit.cache_clear()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    monkeypatch.setenv("RETRAIN_RETRY_FIRST_SECONDS", "0")
    monkeypatch.setenv("RETRAIN_RETRY_MAX_SECONDS", "0")
    monkeypatch.delenv("RETRAIN_LANDING_URL", raising=False)
    monkeypatch.delenv("RETRAIN_STORAGE_URL", raising=False)
    monkeypatch.setenv("RETRAIN_TRAINING_BACKEND", "slurm")
    monkeypatch.setenv("RETRAIN_SLURM_URL", slurm_cluster.rest_url)
    monkeypatch.setenv("RETRAIN_SLURM_PARTITION", PARTITION)
    monkeypatch.setenv("RETRAIN_SLURM_TIME_LIMIT_MINUTES", "10")
    monkeypatch.setenv("RETRAIN_SLURM_STORAGE", str(tmp_path / "shared"))
    # definitions.py reads the reference service's URL and token; the Slurm backend ignores them
    monkeypatch.setenv("RETRAIN_GPU_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RETRAIN_GPU_TOKEN", "unused")
    dagster_instance.add_dynamic_partitions(str(CUSTOMERS.name), [s.name for s in TENANTS])
    publish_feature_range(dagster_instance, START, START + dt.timedelta(days=DAYS - 1))
    yield dagster_instance
    code_commit.cache_clear()


def state_of(db: str) -> str:
    found = pointer(db, "training", CUSTOMER)
    assert found is not None
    return found.state


def test_the_training_machine_trains_one_candidate_through_slurm(
    slurm_world: dg.DagsterInstance, app_db: str
) -> None:
    instance = slurm_world
    submitted = materialize(instance, [training_job], train_config())
    meta = submitted.asset_materializations_for_node("training_job")[0].metadata
    key, job_id = str(meta["run_key"].value), str(meta["job_id"].value)
    assert job_id.endswith(f":{key}")  # `<slurm job id>:<run key>`
    assert state_of(app_db) == "POLL_JOB"  # the run has ended

    request = poll_until_requested(instance, seconds=120)
    assert request.run_key == f"candidate-{key}-1"
    fetched = materialize(instance, [model_candidate], dict(request.run_config))
    sha = fetched.asset_materializations_for_node("model_candidate")[0].metadata["sha256"].value
    files = JobFiles.of(settings.slurm_storage(), key)
    assert sha == json.loads(files.result.read_text())["sha256"]
    assert state_of(app_db) == "AWAIT_GATE"
    notes = [row.note or "" for row in history(app_db, "training", CUSTOMER, key)]
    assert any("Slurm" in note for note in notes), notes  # the poll's words name Slurm's state

    again = materialize(instance, [training_job], train_config())  # the same key asked again
    assert again.asset_materializations_for_node("training_job")[0].metadata["run_key"].value == key
    assert CandidateTable(app_db, storage_root()).count_for(key) == 1
    backend = slurm_backend()
    assert len(slurm_jobs_of(backend, key)) == 1  # one Slurm job for the run key
    backend.close()


def test_slurmrestd_killed_during_poll_job_is_an_outage_the_run_comes_back_from(
    slurm_world: dg.DagsterInstance, app_db: str, slurm_cluster: SlurmCluster
) -> None:
    instance = slurm_world
    submitted = materialize(instance, [training_job], train_config(**SLOW))
    meta = submitted.asset_materializations_for_node("training_job")[0].metadata
    key = str(meta["run_key"].value)
    slurm_cluster.kill_daemon("slurmrestd")
    try:
        tick(instance)  # the status call finds nobody: an outage, recorded once
        found = pointer(app_db, "training", CUSTOMER)
        assert found is not None and found.state == "POLL_JOB"
        assert "training service unreachable since" in (found.last_error or "")
    finally:
        slurm_cluster.start_daemon("slurmrestd")
    poll_until_requested(instance, seconds=120)  # the job kept training meanwhile
    notes = [row.note or "" for row in history(app_db, "training", CUSTOMER, key)]
    assert any("training service reachable again" in note for note in notes), notes
    backend = slurm_backend()
    assert len(slurm_jobs_of(backend, key)) == 1  # the outage queued no second job
    backend.close()


def test_a_job_that_hits_its_time_limit_times_out_and_the_resubmission_resumes(
    slurm: SlurmBackend, dataset: Path
) -> None:
    short = SlurmBackend(
        slurm.rest, slurm.storage, dataclasses.replace(slurm.options, time_limit_minutes=1)
    )
    key = new_key()
    # 120 s: past the 1-min limit and past Slurm's check of limits (every 30 s, then KillWait 5 s),
    # which at 80 s let the job finish first on a quiet machine
    crawl = {"faults": {"slow_seconds_per_round": 3.0, "on_attempts": [1]}}
    spec = training_spec(dataset, **crawl)
    job = short.submit(key, spec)
    ended = wait_for(short, job.id, lambda j: j.status.finished, 180, "the time limit")
    assert ended.status is JobStatus.FAILED
    assert "Slurm TIMEOUT: hit its time limit" in (ended.error or "")
    assert "time limit 1 min" in (ended.error or "")
    again = slurm.submit(key, spec)  # JOB_FAILED's resubmission, with the usual limit
    assert again.attempt == 2
    done = wait_for(slurm, again.id, lambda j: j.status.finished, 90, "the resubmitted job")
    assert done.status is JobStatus.SUCCEEDED, done.error
    result = json.loads(JobFiles.of(slurm.storage, key).result.read_text())
    assert result["resumed_from_round"] >= 10


def test_slurmctld_killed_during_poll_job_is_an_outage_and_the_restarted_one_knows_the_job(
    slurm_world: dg.DagsterInstance, app_db: str, slurm_cluster: SlurmCluster
) -> None:
    """slurmctld restarts from its state folder, so the job it ran before its death goes on.

    The kill waits until the state folder holds the job as running: a job submitted in the
    last seconds before a crash can be lost (the backend then judges it by its folder).
    """
    instance = slurm_world
    submitted = materialize(instance, [training_job], train_config(**SLOW))
    meta = submitted.asset_materializations_for_node("training_job")[0].metadata
    key, job_id = str(meta["run_key"].value), str(meta["job_id"].value)
    slurm_id = int(job_id.split(":")[0])
    backend = slurm_backend()
    wait_for(backend, job_id, lambda j: (j.last_checkpoint_round or 0) >= 10, 90, "a checkpoint")
    started = int(backend.rest.job(slurm_id)["start_time"])
    saved = slurm_cluster.paths.state_dir / "job_state"
    wait_until(lambda: saved.stat().st_mtime >= started, 30, "slurmctld saving the running job")
    slurm_cluster.kill_daemon("slurmctld")
    try:
        tick(instance)  # slurmrestd answers "slurmctld down": an outage, recorded once
        found = pointer(app_db, "training", CUSTOMER)
        assert found is not None and found.state == "POLL_JOB"
        assert "training service unreachable since" in (found.last_error or "")
    finally:
        slurm_cluster.start_daemon("slurmctld")
    request = poll_until_requested(instance, seconds=120)  # the job trained on meanwhile
    notes = [row.note or "" for row in history(app_db, "training", CUSTOMER, key)]
    assert any("training service reachable again" in note for note in notes), notes
    materialize(instance, [model_candidate], dict(request.run_config))
    assert CandidateTable(app_db, storage_root()).count_for(key) == 1
    assert slurm_jobs_of(backend, key) == [slurm_id]  # the restarted controller, no second job
    backend.close()


def drained_nodes(cluster: SlurmCluster) -> list[str]:
    """Return the cluster's nodes a drain or a down state keeps from taking jobs."""
    nodes = SlurmRest(cluster.rest_url).nodes()
    return [str(n["name"]) for n in nodes if {"DRAIN", "DOWN"} & set(n.get("state_flags") or [])]


def scontrol(cluster: SlurmCluster, *words: str) -> None:
    """Run an operator's `scontrol` (SLURM_CONF set), failing the test with its words."""
    done = subprocess.run(
        ["scontrol", *words], env=cluster.env(), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stdout + done.stderr


def resume_node(cluster: SlurmCluster, node: str) -> None:
    """Resume a drained or down node as an operator would; one that came back meanwhile is fine.

    A node DOWN after slurmctld's restart returns by itself once slurmd registers again; if it
    did between the read and the command, Slurm refuses the resume ("Invalid node state
    specified") and there is nothing left to do.
    """
    done = subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=resume"],
        env=cluster.env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        refused = "Invalid node state specified" in done.stderr
        assert refused and node not in drained_nodes(cluster), done.stdout + done.stderr


def burn_reused_job_ids(slurm: SlurmBackend, cluster: SlurmCluster) -> list[str]:
    """Submit probes until one runs; return the holds met. Leaves the cluster as found.

    Measured here: a job slurmctld lost in a crash still ran under slurmd; the restarted
    controller gives its id to a later job, which slurmd refuses as a duplicate (held, "launch
    failed requeued held", the node DRAINED "Duplicate jobid"). Each held probe uses up one
    such id; the operator's resume brings the node back.
    """
    holds: list[str] = []
    folder = slurm.storage / "probes"
    folder.mkdir(parents=True, exist_ok=True)
    probe = {
        "name": "retrain-probe",
        "current_working_directory": str(folder),
        "environment": {"PATH": "/usr/bin:/bin"},
        "partition": PARTITION,
    }
    for _ in range(6):
        probe_id = slurm.rest.submit("#!/bin/sh\ntrue\n", probe)
        seen: list[dict[str, Any]] = []

        def settled(job_id: int = probe_id, seen: list[dict[str, Any]] = seen) -> bool:
            seen.append(slurm.rest.job(job_id))
            return states.finished(seen[-1]) or stuck.is_held(seen[-1])

        def last(seen: list[dict[str, Any]] = seen) -> str:
            return repr(seen[-1:])

        wait_until(settled, 60, "a probe job to run or be held", detail=last)
        if states.finished(seen[-1]):
            return holds
        holds.append(f"{probe_id}: {seen[-1].get('state_description')}")
        slurm.rest.cancel(probe_id)
        for node in drained_nodes(cluster):
            resume_node(cluster, node)
    raise AssertionError(f"probes kept being held: {holds}")


def settle(slurm: SlurmBackend, cluster: SlurmCluster, job_id: str, seen: list[str]) -> Job:
    """Wait for the job to finish; a hold it is named with is lifted by the operator's commands.

    Measured here: after a crash the restarted slurmctld may give a lost job's id to the next
    submission, which slurmd refuses as a duplicate (held, the node DRAINED), so a resubmission
    can be held as well as the first job. The attention must name each command the test runs.
    """
    slurm_id = int(job_id.split(":")[0])
    for _ in range(3):
        done = wait_for(
            slurm, job_id, lambda j: j.status.finished or bool(j.attention), 90, "an outcome"
        )
        if not done.attention or done.status.finished:
            return done
        seen.append(f"held: {done.attention}")
        for node in drained_nodes(cluster):
            assert f"nodename={node} state=resume" in done.attention
            resume_node(cluster, node)
        if "scontrol release" in done.attention:
            assert f"`scontrol release {slurm_id}`" in done.attention
            scontrol(cluster, "release", str(slurm_id))
        wait_for(slurm, job_id, lambda j: j.status.finished or not j.attention, 60, "the release")
    raise AssertionError(f"job {job_id} stayed held after the operator's commands: {seen}")


def test_slurmctld_killed_right_after_each_submit_costs_a_download_not_a_day(
    slurm: SlurmBackend, dataset: Path, baseline_sha256: str, slurm_cluster: SlurmCluster
) -> None:
    """Three times in a row: submit, SIGKILL slurmctld within 2 s, restart it from its state.

    Measured: a job that started before the kill finishes under slurmstepd while the controller
    is away, and the restarted one recovers it held and requeued (PENDING, priority 0,
    JobHeldUser) with the node DRAINED; a job that had not started may be lost. Each way the
    key ends with one model: its result.json is success whatever Slurm says (the held copy
    cancelled), or a lost job is resubmitted, or a hold without a result is named with the
    commands, which the test then runs as the operator would.
    """
    seen: list[str] = []
    for _ in range(3):
        key = new_key()
        spec = training_spec(dataset)
        job = slurm.submit(key, spec)
        slurm_id = int(job.id.split(":")[0])
        files = JobFiles.of(slurm.storage, key)
        submitted = time.monotonic()
        started = False
        while not started and time.monotonic() - submitted < 1.8:
            started = slurm.rest.job(slurm_id)["job_state"] == "RUNNING"
        slurm_cluster.kill_daemon("slurmctld")
        try:
            # launched by slurmstepd (its output exists: Slurm saying RUNNING is not enough on
            # a loaded machine), it trains on without the controller: its result is the event
            if started and files.output(slurm_id).exists():
                wait_until(files.result.exists, 60, "the job's result without slurmctld")
        finally:
            slurm_cluster.start_daemon("slurmctld")
        done = settle(slurm, slurm_cluster, job.id, seen)
        if done.status is not JobStatus.SUCCEEDED:  # lost by the crash: the machine resubmits
            seen.append(f"resubmitted after: {done.error}")
            assert "Slurm no longer knows job" in (done.error or ""), done
            job = slurm.submit(key, spec)  # may get the lost job's id back, and be held for it
            done = settle(slurm, slurm_cluster, job.id, seen)
        else:
            seen.append(f"succeeded: {done.detail}")
        assert done.status is JobStatus.SUCCEEDED, (seen, done)
        artifact = slurm.download(done.id, slurm.storage / "downloads" / key)
        assert artifact.sha256 == baseline_sha256

        def left(name: str = job_name(key)) -> list[str]:  # the key's jobs Slurm still runs
            jobs = [j for j in slurm.rest.jobs() if j["name"] == name]
            return [f"{j['job_id']} {j['job_state']}" for j in jobs if not states.finished(j)]

        def why(said: list[str] = seen) -> str:
            return f"{said} {left()}"

        wait_until(lambda: not left(), 30, "Slurm's copy cancelled", detail=why)
        for node in drained_nodes(slurm_cluster):  # the "Duplicate jobid" drain, for the next
            resume_node(slurm_cluster, node)
        seen += [f"probe held: {hold}" for hold in burn_reused_job_ids(slurm, slurm_cluster)]
    print("\n".join(seen))


def test_slurmd_killed_mid_training_the_job_is_requeued_and_resumes_its_checkpoint(
    slurm: SlurmBackend, slurm_cluster: SlurmCluster, dataset: Path, baseline_sha256: str
) -> None:
    """A silent slurmd's node goes DOWN; Slurm requeues the job (--requeue), never NODE_FAIL.

    The training outlives slurmd (slurmstepd runs in a session of its own) until slurmd comes
    back and slurmctld has it killed, before the requeued job may start (`cred_expire` later):
    one training at a time, under one Slurm job id all along.
    """
    key = new_key()
    job = slurm.submit(key, training_spec(dataset, **CRAWL))
    slurm_id = int(job.id.split(":")[0])
    wait_for(slurm, job.id, lambda j: (j.last_checkpoint_round or 0) >= 10, 90, "a checkpoint")
    slurm_cluster.kill_daemon("slurmd")
    try:
        requeued = wait_for(
            slurm, job.id, lambda j: j.status is not JobStatus.RUNNING, 60, "the node's failure"
        )
        assert requeued.status is JobStatus.QUEUED, requeued.error  # requeued, not failed
        assert "requeued 1 time(s)" in (requeued.detail or ""), requeued.detail
        node = subprocess.run(
            ["sinfo", "--noheader", "--format=%T"],
            env=slurm_cluster.env(),
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        assert node.stdout.strip().startswith("down"), node.stdout
    finally:
        slurm_cluster.start_daemon("slurmd")
    done = wait_for(slurm, job.id, lambda j: j.status.finished, 120, "the requeued job")
    assert done.status is JobStatus.SUCCEEDED, done.error
    result = json.loads(JobFiles.of(slurm.storage, key).result.read_text())
    assert result["job_id"] == str(slurm_id)
    assert result["resumed_from_round"] >= 10  # the checkpoint, not round 0
    assert result["sha256"] == baseline_sha256  # and the same model as an uninterrupted run
    assert done.attempt == 1 and slurm_jobs_of(slurm, key) == [slurm_id]  # no resubmission


@contextlib.contextmanager
def another_slurmrestd(cluster: SlurmCluster, *options: str) -> Iterator[str]:
    """Run a second slurmrestd on the cluster with these options; yield its `unix://` URL."""
    socket = cluster.paths.root / f"slurmrestd-{uuid.uuid4().hex[:8]}.socket"
    sbin = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    binary = shutil.which("slurmrestd", path=sbin)
    assert binary is not None, "slurmrestd is not installed"
    process = subprocess.Popen(
        [binary, *options, f"unix:{socket}"],
        env=cluster.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: socket.exists() or process.poll() is not None, 30, "slurmrestd")
        assert process.poll() is None, f"slurmrestd {options} exited with {process.returncode}"
        yield f"unix://{socket}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def poller_tick(db: str, instance: dg.DagsterInstance) -> str:
    """Evaluate `gpu_job_poller` on the backend the environment names; return its skip reason."""
    resources = {
        "project_db": ProjectDatabase(url=db),
        "gpu_service": GpuServiceResource(timeout_seconds=30),
        "partition_storage": PartitionStorage(),
    }
    result = gpu_job_poller(dg.build_sensor_context(instance=instance, resources=resources))
    assert not result.run_requests and result.skip_reason is not None
    return result.skip_reason.skip_message


def test_a_refused_token_and_a_plugin_not_served_fail_the_poll_and_no_socket_is_an_outage(
    slurm: SlurmBackend,
    slurm_cluster: SlurmCluster,
    app_db: str,
    dagster_instance: dg.DagsterInstance,
    dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """slurmrestd's 401 (rest_auth/jwt, expired token) and 404 are answers, not an outage."""
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RETRAIN_TRAINING_BACKEND", "slurm")
    monkeypatch.setenv("RETRAIN_SLURM_STORAGE", str(slurm.storage))
    held = SlurmBackend(slurm.rest, slurm.storage, dataclasses.replace(slurm.options, hold=True))
    start_training(app_db, "acme", new_key(), training_spec(dataset))  # held: never trains
    advance(app_db, training_machine(), "acme", training_services(app_db, held, storage_root()))
    polled = pointer(app_db, "training", "acme")
    assert polled is not None and polled.state == "POLL_JOB"
    job_id, visits = str(polled.payload["job_id"]), polled.visits["POLL_JOB"]
    not_read = f"status of job {job_id} not read (not an outage): SlurmRestError: slurmrestd GET"
    asked = f"/job/{job_id.split(':')[0]}"  # one job: the poller's batch asks it by id
    try:
        answers = [
            (("-a", "rest_auth/jwt", "-s", OPENAPI_PLUGIN), "expired.jwt.token", "401"),
            (("-a", "rest_auth/local", "-s", "openapi/v0.0.37"), None, "404"),
        ]
        for spent, (options, token, status) in enumerate(answers, start=1):
            with another_slurmrestd(slurm_cluster, *options) as url:
                monkeypatch.setenv("RETRAIN_SLURM_URL", url)
                if token:
                    monkeypatch.setenv("RETRAIN_SLURM_TOKEN", token)
                    monkeypatch.setenv("RETRAIN_SLURM_USER", "root")
                said = poller_tick(app_db, dagster_instance)
                monkeypatch.delenv("RETRAIN_SLURM_TOKEN", raising=False)
            p = pointer(app_db, "training", "acme")
            assert p is not None and p.last_error is not None
            assert p.last_error.startswith(f"{not_read} {asked} -> {status}: "), p.last_error
            assert p.visits["POLL_JOB"] == visits + spent and "unreachable_since" not in p.payload
            assert said.startswith("GPU status call failed (not an outage)"), said
            assert f"SlurmRestError: slurmrestd GET {asked} -> {status}: " in said
        words = history(app_db, "training", "acme")[-2:]
        assert "'Authentication failure'" in (words[0].error or "")
        assert "'Unable find requested URL." in (words[1].error or "")

        monkeypatch.setenv("RETRAIN_SLURM_URL", f"unix://{tmp_path / 'nobody.socket'}")
        said = poller_tick(app_db, dagster_instance)
        p = pointer(app_db, "training", "acme")
        assert p is not None and (p.last_error or "").startswith(
            "training service unreachable since "
        )
        assert said.startswith("GPU service unreachable, 0 poll(s) wait, 1 outage(s)"), said
    finally:
        slurm.cancel(job_id)
