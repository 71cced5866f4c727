import dataclasses

import pytest

from retrain_assets.gpu.protocol import ArtifactCorrupt, JobStatus
from retrain_assets.machines import (
    RunActive,
    advance,
    advance_many,
    history,
    pointer,
    pointers_in_state,
    start_run,
)
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets_tests.machines.fakes import FakeGpu
from retrain_assets_tests.machines.training_services import SPEC, services


def fetching(svc):
    """The same services as the candidate run has them: it alone downloads."""
    return dataclasses.replace(svc, fetching=True)


def states(db, customer="acme"):
    return [h.state for h in history(db, "training", customer)]


def test_runs_to_the_poll_yield_and_persists_the_job(db, tmp_path):
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC)
    result = advance(db, training_machine(), "acme", svc)
    assert result.waiting
    p = pointer(db, "training", "acme")
    assert (p.state, p.status) == ("POLL_JOB", "waiting")
    assert p.payload == {"spec": SPEC, "job_id": "job-1"}
    assert states(db) == ["INITIAL", "CHECK_LAST_TRAIN", "SUBMIT_JOB", "POLL_JOB"]
    assert svc.gpu.calls == {"find": 1, "submit": 1, "get": 1}
    assert [q.customer for q in pointers_in_state(db, "training", "POLL_JOB")] == ["acme"]


def test_resumes_after_a_restart_without_resubmitting(db, tmp_path):
    before = services(tmp_path)
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", before)
    # a new process: new machine object, new clients, same database and same remote service
    after = services(tmp_path, gpu=FakeGpu(jobs=before.gpu.jobs))
    assert advance(db, training_machine(), "acme", after).waiting
    after.gpu.set_status("job-1", JobStatus.SUCCEEDED)
    fetched = advance(db, training_machine(), "acme", fetching(after))
    assert (fetched.waiting, fetched.pointer.state) == (True, "AWAIT_GATE")
    assert after.gpu.calls == {"get": 2, "download": 1}
    assert after.candidates.saved[("acme", "k1")].job_id == "job-1"
    assert pointer(db, "training", "acme").visits["POLL_JOB"] == 3
    assert states(db)[-5:] == [
        "POLL_JOB",
        "POLL_JOB",
        "AWAIT_CANDIDATE",
        "DOWNLOAD_SAVE",
        "AWAIT_GATE",
    ]


def test_poll_uses_statuses_the_sensor_already_fetched(db, tmp_path):
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", svc)
    prefetched = svc.gpu.statuses(["job-1"])
    assert advance(db, training_machine(), "acme", svc, prefetched=prefetched).waiting
    svc.gpu.set_status("job-1", JobStatus.SUCCEEDED)
    prefetched = svc.gpu.statuses(["job-1"])
    handed = advance(db, training_machine(), "acme", svc, prefetched=prefetched)
    assert (handed.waiting, handed.pointer.state) == (True, "AWAIT_CANDIDATE")
    assert svc.gpu.calls["get"] == 1  # only the first advance's poll, before any batch existed
    assert svc.gpu.calls["download"] == 0  # the candidate run downloads, not the sensor


def test_submit_budget_three_then_failed(db, tmp_path):
    svc = services(tmp_path)
    svc.gpu.down = True
    start_training(db, "acme", "k1", SPEC)
    waits = [advance(db, training_machine(), "acme", svc).pointer for _ in range(3)]
    assert [w.state for w in waits] == ["SUBMIT_JOB", "SUBMIT_JOB", "FAILED"]  # one try each
    ended = waits[-1]
    assert svc.gpu.calls == {"find": 1, "submit": 3}
    assert ended.state == "FAILED"
    assert ended.reason.startswith(
        "max retries reached: SUBMIT_JOB would exceed its budget of 3 visits; last error: "
        "ConnectionError: gpu service unreachable (503)"
    )
    assert states(db) == ["INITIAL", "CHECK_LAST_TRAIN"] + ["SUBMIT_JOB", "JOB_FAILED"] * 3 + [
        "SUBMIT_JOB"
    ]
    submits = [h for h in history(db, "training", "acme") if h.state == "SUBMIT_JOB"]
    assert [(h.visit, h.ok, h.note) for h in submits] == [
        (1, False, None),
        (2, False, None),
        (3, False, None),
        (4, False, "not run"),
    ]


def test_a_remote_failure_resubmits_the_same_key(db, tmp_path):
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", svc)
    svc.gpu.set_status("job-1", JobStatus.FAILED, error="CUDA out of memory")
    assert advance(db, training_machine(), "acme", svc).pointer.state == "SUBMIT_JOB"  # waits
    assert svc.gpu.calls["submit"] == 1
    assert advance(db, training_machine(), "acme", svc).waiting
    assert svc.gpu.calls["submit"] == 2
    assert svc.gpu.jobs["job-1"].attempt == 2  # resumed by the service, not a new job
    failed = [h for h in history(db, "training", "acme") if h.state == "POLL_JOB" and not h.ok]
    assert failed[0].error == "remote job job-1 failed (attempt 1): CUDA out of memory"
    assert failed[0].next_state == "JOB_FAILED"


def test_a_tick_that_saw_a_failure_resubmits_once_and_polls_afresh(db, tmp_path):
    """The batch said FAILED; after the resubmission that fact is stale and must not be reused."""
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", svc)
    svc.gpu.set_status("job-1", JobStatus.FAILED, error="CUDA out of memory")
    prefetched = svc.gpu.statuses(["job-1"])
    results = advance_many(db, training_machine(), ["acme"], svc, prefetched=prefetched)
    assert results["acme"].pointer.state == "SUBMIT_JOB"  # the resubmission waits its turn
    results = advance_many(db, training_machine(), ["acme"], svc, prefetched=prefetched)
    assert results["acme"].waiting
    assert svc.gpu.calls["submit"] == 2 and svc.gpu.jobs["job-1"].attempt == 2
    assert states(db)[-4:] == ["POLL_JOB", "JOB_FAILED", "SUBMIT_JOB", "POLL_JOB"]


def test_three_remote_failures_end_the_run(db, tmp_path):
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", svc)
    for _ in range(3):
        svc.gpu.set_status("job-1", JobStatus.CANCELLED, error="preempted")
        result = advance(db, training_machine(), "acme", svc)
        if result.pointer.state == "SUBMIT_JOB":  # the resubmission's wait, then its turn
            result = advance(db, training_machine(), "acme", svc)
    assert result.pointer.state == "FAILED"
    assert "SUBMIT_JOB would exceed its budget of 3" in result.pointer.reason
    assert "remote job job-1 cancelled (attempt 3): preempted" in result.pointer.reason


def test_a_failing_download_retries_the_download_never_the_training(db, tmp_path):
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", svc)
    svc.gpu.set_status("job-1", JobStatus.SUCCEEDED)
    svc.gpu.download_errors = [ArtifactCorrupt("sha256 mismatch"), ConnectionError("reset")]
    tries = [advance(db, training_machine(), "acme", fetching(svc)).pointer for _ in range(3)]
    assert [t.state for t in tries] == ["DOWNLOAD_SAVE", "DOWNLOAD_SAVE", "AWAIT_GATE"]
    assert (svc.gpu.calls["download"], svc.gpu.calls["submit"]) == (3, 1)
    errors = [h.error for h in history(db, "training", "acme") if h.state == "DOWNLOAD_SAVE"]
    assert errors == ["ArtifactCorrupt: sha256 mismatch", "ConnectionError: reset", None]


def test_download_budget_then_failed_and_a_retry_costs_a_download_only(db, tmp_path):
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", svc)
    svc.gpu.set_status("job-1", JobStatus.SUCCEEDED)
    svc.gpu.download_errors = [ArtifactCorrupt("sha256 mismatch")] * 5
    tries = [advance(db, training_machine(), "acme", fetching(svc)).pointer for _ in range(5)]
    assert [t.state for t in tries] == ["DOWNLOAD_SAVE"] * 4 + ["FAILED"]
    failed = tries[-1]
    assert "DOWNLOAD_SAVE would exceed its budget of 5" in failed.reason
    assert (svc.gpu.calls["download"], svc.gpu.calls["submit"]) == (5, 1)
    start_training(db, "acme", "k1", SPEC, retry=True)
    assert advance(db, training_machine(), "acme", fetching(svc)).pointer.state == "AWAIT_GATE"
    assert (svc.gpu.calls["download"], svc.gpu.calls["submit"]) == (6, 1)
    assert states(db)[-5:] == [
        "INITIAL",
        "CHECK_LAST_TRAIN",
        "AWAIT_CANDIDATE",
        "DOWNLOAD_SAVE",
        "AWAIT_GATE",
    ]


def test_a_saved_candidate_costs_nothing_but_still_goes_to_the_gate(db, tmp_path):
    """A re-run whose candidate exists waits for the gate: it never ends DONE ungated."""
    svc = services(tmp_path)
    svc.candidates.saved[("acme", "k1")] = object()
    start_training(db, "acme", "k1", SPEC)
    result = advance(db, training_machine(), "acme", svc)
    assert (result.waiting, result.pointer.state) == (True, "AWAIT_GATE")
    assert svc.gpu.calls == {}
    assert states(db) == ["INITIAL", "CHECK_LAST_TRAIN", "AWAIT_GATE"]
    assert history(db, "training", "acme")[1].note == "candidate already saved"


def test_attaches_to_a_running_remote_job_without_resubmitting(db, tmp_path):
    svc = services(tmp_path)
    job = svc.gpu.add_job("k1", JobStatus.RUNNING)
    start_training(db, "acme", "k1", SPEC)
    result = advance(db, training_machine(), "acme", svc)
    assert result.waiting
    assert result.pointer.payload["job_id"] == job.id
    assert svc.gpu.calls["submit"] == 0
    assert states(db) == ["INITIAL", "CHECK_LAST_TRAIN", "POLL_JOB"]
    assert history(db, "training", "acme")[1].note == f"attached to running job {job.id}"


def test_a_remote_success_costs_a_download_in_the_candidate_run_and_then_the_gate(db, tmp_path):
    """A training_job re-run over a succeeded job hands off: it never ends DONE ungated."""
    svc = services(tmp_path)
    svc.gpu.add_job("k1", JobStatus.SUCCEEDED)
    start_training(db, "acme", "k1", SPEC)
    handed = advance(db, training_machine(), "acme", svc)
    assert (handed.waiting, handed.pointer.state) == (True, "AWAIT_CANDIDATE")
    assert svc.gpu.calls == {"find": 1}
    fetched = advance(db, training_machine(), "acme", fetching(svc))
    assert (fetched.waiting, fetched.pointer.state) == (True, "AWAIT_GATE")
    assert states(db) == [
        "INITIAL",
        "CHECK_LAST_TRAIN",
        "AWAIT_CANDIDATE",
        "AWAIT_CANDIDATE",
        "DOWNLOAD_SAVE",
        "AWAIT_GATE",
    ]
    assert svc.gpu.calls == {"find": 1, "download": 1}


def test_poll_budget_ends_a_job_that_never_finishes(db, tmp_path):
    svc = services(tmp_path)
    machine = training_machine(poll_budget=3)
    start_training(db, "acme", "k1", SPEC, machine=machine)
    for _ in range(3):
        assert advance(db, machine, "acme", svc).waiting
    ended = advance(db, machine, "acme", svc)
    assert (ended.steps, ended.pointer.state) == (0, "FAILED")
    assert ended.pointer.reason == (
        "max retries reached: POLL_JOB would exceed its budget of 3 visits"
    )
    assert svc.gpu.calls["get"] == 3


def test_a_poll_that_cannot_reach_the_service_waits_instead_of_resubmitting(db, tmp_path):
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", svc)
    svc.gpu.down = True
    result = advance(db, training_machine(), "acme", svc)
    assert (result.waiting, result.steps, result.pointer.state) == (True, 1, "POLL_JOB")
    assert result.pointer.last_error.startswith("training service unreachable since ")
    assert result.pointer.last_error.endswith(": ConnectionError: gpu service unreachable (503)")
    assert svc.gpu.calls["submit"] == 1


def test_a_run_without_a_spec_fails_at_once(db, tmp_path):
    start_run(db, training_machine(), "acme", "k1", {})
    ended = advance(db, training_machine(), "acme", services(tmp_path)).pointer
    assert ended.state == "FAILED"
    assert ended.reason == "run k1 was started without a job spec in its payload"


def test_a_second_key_is_refused_while_training_runs(db, tmp_path):
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", services(tmp_path))
    with pytest.raises(RunActive, match="training for acme is still running k1"):
        start_training(db, "acme", "k2", SPEC)


def test_a_window_that_cannot_be_judged_is_refused_at_initial_before_any_call(db, tmp_path):
    svc = services(tmp_path)
    verdict = {"enough": False, "reason": "not enough evidence: holdout a .. b has 0 rows"}
    start_training(db, "acme", "k1", SPEC, evidence=verdict)
    ended = advance(db, training_machine(), "acme", svc).pointer
    assert (ended.state, ended.status) == ("FAILED", "terminal")
    assert ended.reason == (
        "window refused before any GPU job: not enough evidence: holdout a .. b has 0 rows"
    )
    assert svc.gpu.calls == {} and states(db) == ["INITIAL"]


def test_a_judged_window_says_so_and_goes_on(db, tmp_path):
    verdict = {"enough": True, "reason": "60 training rows, 42 holdout rows", "window": "a .. b"}
    start_training(db, "acme", "k1", SPEC, evidence=verdict)
    assert advance(db, training_machine(), "acme", services(tmp_path)).waiting
    assert history(db, "training", "acme")[0].note == (
        "window a .. b judged: 60 training rows, 42 holdout rows"
    )


def test_a_job_that_needs_a_person_is_named_at_once_and_the_poll_goes_on_after_release(
    db, tmp_path
):
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", svc)
    hold = "Slurm job 7 is held ...; to go on: `scontrol release 7`"
    svc.gpu.jobs["job-1"] = dataclasses.replace(svc.gpu.jobs["job-1"], attention=hold)
    known = {"acme": pointer(db, "training", "acme")}
    prefetched = svc.gpu.statuses(["job-1"])  # the sensor's path: no plain recorded wait
    advance_many(db, training_machine(), ["acme"], svc, prefetched=prefetched, known=known)
    p = pointer(db, "training", "acme")
    assert p.state == "POLL_JOB"
    assert p.last_error == f"job job-1 queued but stuck: {hold}"
    assert history(db, "training", "acme")[-1].error == p.last_error
    svc.gpu.jobs["job-1"] = dataclasses.replace(svc.gpu.jobs["job-1"], attention=None)
    assert advance(db, training_machine(), "acme", svc).waiting  # released: waits again
    assert pointer(db, "training", "acme").state == "POLL_JOB"
