"""Held and stuck Slurm jobs, and the result.json rule, on a fake slurmrestd (no cluster).

The job and node records are the ones measured on the one-node cluster after slurmctld was
SIGKILLed right after a submit: PENDING, priority 0, JobHeldUser, "launch failed requeued
held", the only node DRAINED by "Duplicate jobid".
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from retrain_assets.gpu.protocol import JobStatus
from retrain_assets.gpu.slurm import backend as backend_module
from retrain_assets.gpu.slurm import stuck
from retrain_assets.gpu.slurm.backend import BY_ID_LIMIT, SlurmBackend, SlurmJobOptions
from retrain_assets.gpu.slurm.job_files import JobFiles, job_name
from retrain_assets.gpu.slurm.rest import SlurmRestError, UnknownJob
from retrain_assets.machines.outage import is_unreachable
from retrain_assets_tests.gpu.service_process import training_spec

KEY = "0123456789abcdef"
HELD = {
    "job_id": 1,
    "name": job_name(KEY),
    "job_state": "PENDING",
    "state_reason": "JobHeldUser",
    "state_description": "launch failed requeued held",
    "hold": None,
    "priority": 0,
    "restart_cnt": 1,
    "partition": "retrain",
    "user_name": "root",
    "comment": "",
}
DRAINED = {
    "name": "vm",
    "state": "idle",
    "state_flags": ["DRAIN"],
    "reason": "Duplicate jobid",
    "partitions": ["retrain"],
}
IDLE = {"name": "vm2", "state": "idle", "state_flags": [], "reason": "", "partitions": ["retrain"]}


class FakeRest:
    """slurmrestd's calls the backend makes, over in-memory jobs and nodes; counts each call."""

    def __init__(self, jobs: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        self.records = {int(job["job_id"]): dict(job) for job in jobs}
        self.node_records = nodes
        self.calls: Counter[str] = Counter()
        self.cancel_error: SlurmRestError | None = None
        self.job_errors: dict[int, SlurmRestError] = {}  # `GET /job/{id}` fails for these ids
        self.submitted: list[dict[str, Any]] = []

    def jobs(self) -> list[dict[str, Any]]:
        self.calls["jobs"] += 1
        return list(self.records.values())

    def job(self, job_id: int) -> dict[str, Any]:
        self.calls["job"] += 1
        if job_id in self.job_errors:
            raise self.job_errors[job_id]
        if job_id not in self.records:
            raise UnknownJob(f"GET /job/{job_id}", 500, "unknown", (2017,))
        return self.records[job_id]

    def nodes(self) -> list[dict[str, Any]]:
        self.calls["nodes"] += 1
        return self.node_records

    def cancel(self, job_id: int) -> None:
        self.calls["cancel"] += 1
        if self.cancel_error is not None:
            raise self.cancel_error
        self.records[job_id] = {**self.records[job_id], "job_state": "CANCELLED"}

    def submit(self, script: str, job: dict[str, Any]) -> int:
        self.submitted.append(job)
        new = max(self.records, default=0) + 1
        self.records[new] = {**job, "job_id": new, "job_state": "PENDING", "user_name": "root"}
        return new

    def close(self) -> None:
        pass


def backend(tmp_path: Path, rest: FakeRest, user: str | None = None) -> SlurmBackend:
    return SlurmBackend(rest, tmp_path / "jobs", SlurmJobOptions(user=user))  # type: ignore[arg-type]


def write_result(
    files: JobFiles, job_id: int, model: bytes = b"tree\n", sha: str | None = None
) -> None:
    files.folder.mkdir(parents=True, exist_ok=True)
    files.model.write_bytes(model)
    digest = sha or hashlib.sha256(model).hexdigest()
    result = {"job_id": str(job_id), "sha256": digest, "size": len(model), "metrics": {}}
    files.result.write_text(json.dumps(result))


# --- the classification ------------------------------------------------------------------


def test_the_crash_hold_names_reason_node_and_the_commands_in_order() -> None:
    words = stuck.attention(HELD, [DRAINED, IDLE])
    assert words is not None
    assert "Slurm job 1 is held" in words
    assert "reason JobHeldUser; launch failed requeued held; priority 0" in words
    assert "node(s) vm (DRAIN: Duplicate jobid)" in words and "vm2" not in words
    resume = words.index("`scontrol update nodename=vm state=resume`")
    assert resume < words.index("`scontrol release 1` (a person)")
    assert "`scancel 1`" in words


@pytest.mark.parametrize(
    ("fields", "held"),
    [
        ({"state_reason": "JobHeldAdmin", "priority": 0}, True),
        ({"state_reason": "Priority", "priority": 0}, True),  # priority 0 alone is a hold
        ({"state_reason": "Priority", "priority": 5, "hold": True}, True),
        ({"job_state": "REQUEUE_HOLD", "state_reason": "None", "priority": 5}, True),
        ({"state_reason": "Priority", "priority": 5, "state_description": ""}, False),
        ({"state_reason": "Resources", "priority": 5, "state_description": ""}, False),
        ({"job_state": "RUNNING", "priority": 0}, False),  # running: nothing holds it
        ({"job_state": "FAILED", "priority": 0}, False),  # ended: the failure path says why
    ],
)
def test_held_is_read_from_priority_hold_reason_and_state(fields: dict, held: bool) -> None:
    job = {**HELD, **fields}
    assert stuck.is_held(job) is held
    assert (stuck.attention(job, []) is not None) is held


def test_an_admin_hold_asks_an_administrator() -> None:
    words = stuck.attention({**HELD, "state_reason": "JobHeldAdmin"}, [])
    assert words is not None and "`scontrol release 1` (an administrator)" in words
    assert "nodename" not in words  # no unusable node: nothing to resume


def test_a_job_waiting_for_down_nodes_names_them_and_asks_no_release() -> None:
    job = {
        **HELD,
        "state_reason": "ReqNodeNotAvail, UnavailableNodes:vm",
        "state_description": "",
        "priority": 100,
    }
    down = {**DRAINED, "state": "down", "state_flags": [], "reason": "Not responding"}
    other = {**DRAINED, "name": "gpu9", "partitions": ["other"]}  # not the job's partition
    words = stuck.attention(job, [down, other])
    assert words is not None and "waiting for nodes that take no job" in words
    assert "vm (DOWN: Not responding)" in words and "gpu9" not in words
    assert "scontrol release" not in words
    assert "`scontrol update nodename=vm state=resume`" in words
    assert stuck.attention(job, [IDLE]) is None  # no node is out (a restarting controller)


def test_a_shared_cluster_names_five_unusable_nodes_and_counts_the_rest() -> None:
    many = [{**DRAINED, "name": f"n{i}"} for i in range(8)]
    words = stuck.attention(HELD, many)
    assert words is not None and "and 3 more" in words
    assert "nodename=n0,n1,n2,n3,n4 state=resume" in words


# --- the backend: result.json wins, the held copy is cancelled ----------------------------


def test_a_held_job_whose_verified_result_names_it_succeeded_and_its_copy_is_cancelled(
    tmp_path: Path,
) -> None:
    rest = FakeRest([HELD], [DRAINED])
    slurm = backend(tmp_path, rest)
    write_result(JobFiles.of(slurm.storage, KEY), 1)
    job = slurm.statuses([f"1:{KEY}"])[f"1:{KEY}"]
    assert job.status is JobStatus.SUCCEEDED and job.error is None and job.attention is None
    assert "names job 1 and its model's sha256 checks" in (job.detail or "")
    assert "Slurm's queued copy cancelled" in (job.detail or "")
    assert rest.calls["cancel"] == 1 and rest.records[1]["job_state"] == "CANCELLED"
    again = slurm.get(f"1:{KEY}")  # Slurm now says CANCELLED: still the result's success
    assert again.status is JobStatus.SUCCEEDED and rest.calls["cancel"] == 1


def test_a_failed_cancel_of_the_copy_is_said_and_the_job_still_succeeded(tmp_path: Path) -> None:
    rest = FakeRest([HELD], [DRAINED])
    rest.cancel_error = SlurmRestError("DELETE /job/1", 500, "Access/permission denied", (2002,))
    slurm = backend(tmp_path, rest)
    write_result(JobFiles.of(slurm.storage, KEY), 1)
    job = slurm.get(f"1:{KEY}")
    assert job.status is JobStatus.SUCCEEDED
    assert "cancelling Slurm's copy failed" in (job.detail or "")
    assert "Access/permission denied" in (job.detail or "") and "`scancel 1`" in (job.detail or "")


@pytest.mark.parametrize(
    "damage",
    ["another job's result", "a model that does not hash to the sha256", "no model"],
)
def test_a_result_that_is_not_this_jobs_verified_one_leaves_the_hold_named(
    tmp_path: Path, damage: str
) -> None:
    rest = FakeRest([HELD], [DRAINED])
    slurm = backend(tmp_path, rest)
    files = JobFiles.of(slurm.storage, KEY)
    if damage == "another job's result":
        write_result(files, 99)
    elif damage == "no model":
        write_result(files, 1)
        files.model.unlink()
    else:
        write_result(files, 1, sha="0" * 64)
    job = slurm.statuses([f"1:{KEY}"])[f"1:{KEY}"]
    assert job.status is JobStatus.QUEUED and rest.calls["cancel"] == 0
    assert job.attention is not None and "`scontrol release 1`" in job.attention
    assert rest.calls["nodes"] == 1  # asked once, because a job looked stuck


@pytest.mark.parametrize("state", ["FAILED", "CANCELLED", "NODE_FAIL", "COMPLETED"])
def test_a_verified_result_is_success_whatever_slurm_says_and_nothing_is_cancelled(
    tmp_path: Path, state: str
) -> None:
    rest = FakeRest([{**HELD, "job_state": state, "priority": 1}], [])
    slurm = backend(tmp_path, rest)
    write_result(JobFiles.of(slurm.storage, KEY), 1)
    job = slurm.get(f"1:{KEY}")
    assert job.status is JobStatus.SUCCEEDED and job.error is None
    assert rest.calls["cancel"] == 0


def test_plain_waiting_jobs_cost_no_node_listing(tmp_path: Path) -> None:
    queued = {**HELD, "state_reason": "Priority", "state_description": "", "priority": 7}
    rest = FakeRest([queued, {**queued, "job_id": 2, "job_state": "RUNNING"}], [DRAINED])
    slurm = backend(tmp_path, rest)
    found = slurm.statuses([f"1:{KEY}", f"2:{KEY}"])
    assert [j.status for j in found.values()] == [JobStatus.QUEUED, JobStatus.RUNNING]
    assert all(j.attention is None for j in found.values())
    assert rest.calls == Counter({"job": 2})


# --- only this platform's jobs -------------------------------------------------------------


def test_the_listing_keeps_only_this_platforms_jobs(tmp_path: Path) -> None:
    slurm = backend(tmp_path, FakeRest([], []), user="retrain")
    mine = {**HELD, "user_name": "retrain", "comment": f"x platform={slurm.platform}"}
    assert slurm.ours(mine) and slurm.ours(mine, KEY) and not slurm.ours(mine, "other")
    assert not slurm.ours({**mine, "user_name": "alice"})  # another user's job
    assert not slurm.ours({**mine, "comment": "x platform=0123456789ab"})  # another platform
    assert not slurm.ours({**mine, "name": "train-resnet"})  # not a run key's name
    assert slurm.ours({**mine, "comment": "retrain_assets run_key=k attempt=1"})  # older jobs
    elsewhere = backend(tmp_path / "other", FakeRest([], []))
    assert elsewhere.platform != slurm.platform  # two storages: two platforms


def test_a_job_of_another_user_with_the_asked_id_is_not_taken_for_ours(tmp_path: Path) -> None:
    theirs = {**HELD, "user_name": "alice", "job_state": "RUNNING", "priority": 9}
    slurm = backend(tmp_path, FakeRest([theirs], []), user="retrain")
    job = slurm.statuses([f"1:{KEY}"])[f"1:{KEY}"]
    assert job.status is JobStatus.FAILED and "Slurm no longer knows job 1" in (job.error or "")


def test_an_id_that_now_names_another_users_job_is_neither_read_as_ours_nor_cancelled(
    tmp_path: Path,
) -> None:
    theirs = {**HELD, "user_name": "alice", "job_state": "RUNNING", "priority": 9}
    rest = FakeRest([theirs], [])
    slurm = backend(tmp_path, rest, user="retrain")
    assert "Slurm no longer knows job 1" in (slurm.get(f"1:{KEY}").error or "")
    job = slurm.cancel(f"1:{KEY}")
    assert rest.calls["cancel"] == 0 and rest.records[1]["job_state"] == "RUNNING"
    assert job.status is JobStatus.FAILED


def test_cancel_still_cancels_this_platforms_own_job(tmp_path: Path) -> None:
    rest = FakeRest([], [])
    slurm = backend(tmp_path, rest)
    submitted = slurm.submit(KEY, training_spec(tmp_path / "features.parquet"))
    assert slurm.cancel(submitted.id).status is JobStatus.CANCELLED
    assert rest.calls["cancel"] == 1 and rest.records[1]["job_state"] == "CANCELLED"


def test_submitted_jobs_append_their_output_and_name_the_platform(tmp_path: Path) -> None:
    rest = FakeRest([], [])
    slurm = backend(tmp_path, rest)
    slurm.submit(KEY, training_spec(tmp_path / "features.parquet"))
    (sent,) = rest.submitted
    assert sent["open_mode"] == "append"  # a requeued run must not truncate slurm-<id>.out
    assert sent["comment"].split()[-1] == f"platform={slurm.platform}"
    assert sent["name"] == job_name(KEY)


# --- the status call: a small batch by id, a large one in one listing ----------------------


def queued_jobs(count: int, first: int = 1) -> list[dict[str, Any]]:
    """Return `count` plainly queued jobs of this platform (no hold: no node listing)."""
    queued = {**HELD, "state_reason": "Priority", "state_description": "", "priority": 7}
    return [{**queued, "job_id": n, "name": job_name(f"k{n}")} for n in range(first, first + count)]


def ids_of(jobs: list[dict[str, Any]]) -> list[str]:
    return [f"{job['job_id']}:k{job['job_id']}" for job in jobs]


def test_a_small_batch_asks_each_job_by_id_and_lists_nothing(tmp_path: Path) -> None:
    jobs = queued_jobs(BY_ID_LIMIT)
    rest = FakeRest([*jobs, *queued_jobs(50, first=10_000)], [DRAINED])  # others: never asked
    found = backend(tmp_path, rest).statuses(ids_of(jobs))
    assert {j.status for j in found.values()} == {JobStatus.QUEUED} and len(found) == BY_ID_LIMIT
    assert rest.calls == Counter({"job": BY_ID_LIMIT})


def test_a_batch_above_the_limit_is_one_listing_and_no_job_is_asked_by_id(tmp_path: Path) -> None:
    jobs = queued_jobs(BY_ID_LIMIT + 1)
    rest = FakeRest(jobs, [DRAINED])
    found = backend(tmp_path, rest).statuses(ids_of(jobs))
    assert {j.status for j in found.values()} == {JobStatus.QUEUED} and len(found) == len(jobs)
    assert rest.calls == Counter({"jobs": 1})


@pytest.mark.parametrize("path", ["by id", "listing"])
def test_forgotten_foreign_and_renamed_jobs_are_judged_alike_by_id_and_by_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    if path == "listing":
        monkeypatch.setattr(backend_module, "BY_ID_LIMIT", 0)
    slurm = backend(tmp_path, FakeRest([], []), user="retrain")
    held = {**HELD, "user_name": "retrain", "comment": f"x platform={slurm.platform}"}
    mine = {**held, "state_reason": "Priority", "state_description": "", "priority": 7}
    records = [
        {**mine, "job_id": 1},  # ours, waiting
        {**held, "job_id": 2, "user_name": "alice"},  # another user's job with the asked id
        {**held, "job_id": 3, "comment": "x platform=0123456789ab"},  # another platform's
        {**mine, "job_id": 4, "name": job_name("another-key")},  # ours, another run key
    ]
    rest = FakeRest(records, [DRAINED])
    slurm.rest = rest  # type: ignore[assignment]
    asked = [f"{n}:{KEY}" for n in (1, 2, 3, 4, 999)] + ["not-an-id"]
    found = slurm.statuses(asked)
    assert sorted(found) == sorted(asked[:-1])  # an id of another backend's form: left out
    assert found[f"1:{KEY}"].status is JobStatus.QUEUED
    for n in (2, 3, 4, 999):
        job = found[f"{n}:{KEY}"]
        assert job.status is JobStatus.FAILED
        assert f"Slurm no longer knows job {n}" in (job.error or "")
    # the others' held jobs are not ours: they cost no node listing
    assert rest.calls == {"by id": Counter(job=5), "listing": Counter(jobs=1)}[path]


def test_several_held_jobs_by_id_ask_the_nodes_once(tmp_path: Path) -> None:
    rest = FakeRest([HELD, {**HELD, "job_id": 2}], [DRAINED])
    found = backend(tmp_path, rest).statuses([f"1:{KEY}", f"2:{KEY}"])
    assert all(j.attention for j in found.values())
    assert rest.calls == Counter({"job": 2, "nodes": 1})


@pytest.mark.parametrize(
    "error",
    [
        SlurmRestError("GET /job/2", None, "Unable to contact slurm controller", (-1,)),
        SlurmRestError("GET /job/2", 401, "not a JSON object: 'Authentication failure'"),
    ],
    ids=["outage", "answer"],
)
def test_one_failed_call_by_id_fails_the_batch_with_that_very_error(
    tmp_path: Path, error: SlurmRestError
) -> None:
    jobs = queued_jobs(3)
    rest = FakeRest(jobs, [])
    rest.job_errors[2] = error
    with pytest.raises(SlurmRestError) as failed:
        backend(tmp_path, rest).statuses(ids_of(jobs))
    assert failed.value is error  # the poller tells an outage from an answer by it
    assert is_unreachable(failed.value) is (error.status is None)
    assert rest.calls["jobs"] == 0
