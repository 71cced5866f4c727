"""The explicit map from Slurm's job states to job statuses and the words the machine records."""

import pytest

from retrain_assets.gpu.protocol import Job, JobStatus
from retrain_assets.gpu.slurm import states
from retrain_assets.machines.training import wait_note

# The states the issue names, and where each one sends the training machine.
NAMED = {
    "PENDING": JobStatus.QUEUED,  # POLL_JOB waits
    "RUNNING": JobStatus.RUNNING,  # POLL_JOB waits
    "COMPLETED": JobStatus.SUCCEEDED,  # AWAIT_CANDIDATE (with a result; else FAILED)
    "FAILED": JobStatus.FAILED,  # JOB_FAILED -> SUBMIT_JOB looks the key up again
    "TIMEOUT": JobStatus.FAILED,
    "NODE_FAIL": JobStatus.FAILED,
    "PREEMPTED": JobStatus.FAILED,
    "OUT_OF_MEMORY": JobStatus.FAILED,
    "CANCELLED": JobStatus.CANCELLED,  # JOB_FAILED too, its reason saying who cancelled
}


@pytest.mark.parametrize(("state", "status"), sorted(NAMED.items()))
def test_each_named_state_has_its_status(state: str, status: JobStatus) -> None:
    assert states.meaning({"job_state": state}).status is status


def test_every_final_state_is_finished_and_every_other_waits() -> None:
    waiting = {name for name, m in states.STATES.items() if not m.status.finished}
    assert {"PENDING", "RUNNING", "REQUEUED", "COMPLETING", "SUSPENDED"} <= waiting
    assert not {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"} & waiting


def test_a_state_the_table_does_not_name_fails_saying_so_instead_of_waiting() -> None:
    found = states.meaning({"job_state": "WARPED"})
    assert found.status is JobStatus.FAILED
    assert "'WARPED', which this backend does not know" in found.words
    assert states.meaning({}).status is JobStatus.FAILED  # no state at all: the same


def test_flags_after_the_state_and_lower_case_are_read_as_the_base_state() -> None:
    assert states.base_state({"job_state": "pending,requeued"}) == "PENDING"
    assert states.base_state({"job_state": ["RUNNING", "COMPLETING"]}) == "RUNNING"


def test_the_words_carry_reason_exit_status_time_limit_and_requeues() -> None:
    timeout = {
        "job_state": "TIMEOUT",
        "state_reason": "TimeLimit",
        "exit_code": 15,
        "time_limit": 1,
    }
    assert states.describe(timeout) == (
        "Slurm TIMEOUT: hit its time limit, reason TimeLimit, exit 0:15, time limit 1 min"
    )
    failed = {"job_state": "FAILED", "state_reason": "NonZeroExitCode", "exit_code": 768}
    assert "exit 3:0" in states.describe(failed)  # the raw wait status of `exit 3`
    requeued = {"job_state": "PENDING", "state_reason": "BeginTime", "restart_cnt": 1}
    assert states.describe(requeued) == (
        "Slurm PENDING: waiting in Slurm's queue, reason BeginTime, requeued 1 time(s)"
    )


def test_a_waiting_poll_note_names_the_slurm_state() -> None:
    job = Job("7:k", "k", JobStatus.QUEUED, 1, 0, 40, None, detail="Slurm PENDING: waiting")
    assert wait_note(job) == "queued 0/40 rounds (Slurm PENDING: waiting)"
    plain = Job("7:k", "k", JobStatus.RUNNING, 1, 5, 40, None)
    assert wait_note(plain) == "running 5/40 rounds"
