"""Retries that wait (issue 31): each retry is a later advance, due after a backoff with jitter.

The clock the engine reads (`engine._now`) is moved forward by the tests instead of sleeping.
"""

import dataclasses
import datetime as dt

import pytest

from retrain_assets.automation.gpu_job_poller import due
from retrain_assets.automation.handoff import handoff_requests
from retrain_assets.gpu.protocol import ArtifactCorrupt, JobStatus
from retrain_assets.machines import advance, engine, history, pointer
from retrain_assets.machines.backoff import RETRY_AT, Backoff, retry_due
from retrain_assets.machines.handoff import HandoffFacts
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets.runtime.machine_report import status_lines
from retrain_assets_tests.machines.training_services import SPEC, services

MINUTE = Backoff(first_seconds=60, max_seconds=240, jitter=0.0)


class Clock:
    """The engine's clock, moved by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset = dt.timedelta()
        real = engine._now
        monkeypatch.setattr(engine, "_now", lambda: real() + self.offset)

    def forward(self, seconds: float) -> None:
        self.offset += dt.timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch):
    return Clock(monkeypatch)


def succeeded(db, tmp_path, machine):
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC, machine=machine)
    advance(db, machine, "acme", svc)
    svc.gpu.set_status("job-1", JobStatus.SUCCEEDED)
    return dataclasses.replace(svc, fetching=True)


def test_backoff_doubles_up_to_its_ceiling_with_jitter_either_side():
    plain = Backoff(30, 200, 0.0)
    assert [plain.delay(n) for n in (1, 2, 3, 4, 5)] == [30, 60, 120, 200, 200]
    jittered = Backoff(30, 200, 0.25)
    assert jittered.delay(1, lambda: 0.0) == pytest.approx(22.5)
    assert jittered.delay(1, lambda: 1.0) == pytest.approx(37.5)
    with pytest.raises(ValueError, match="retry must be >= 1"):
        plain.delay(0)


def test_the_waits_are_settings_and_a_bad_one_is_named(monkeypatch):
    monkeypatch.setenv("RETRAIN_RETRY_FIRST_SECONDS", "5")
    monkeypatch.setenv("RETRAIN_RETRY_MAX_SECONDS", "40")
    monkeypatch.setenv("RETRAIN_RETRY_JITTER", "0.1")
    assert Backoff.from_settings() == Backoff(5, 40, 0.1)
    monkeypatch.setenv("RETRAIN_RETRY_MAX_SECONDS", "1")
    with pytest.raises(ValueError, match="RETRAIN_RETRY_MAX_SECONDS"):
        Backoff.from_settings()
    monkeypatch.setenv("RETRAIN_RETRY_FIRST_SECONDS", "soon")
    with pytest.raises(ValueError, match="RETRAIN_RETRY_FIRST_SECONDS=soon: must be a number"):
        Backoff.from_settings()


def test_a_failed_download_waits_its_turn_and_the_history_says_when(db, tmp_path, clock):
    machine = training_machine(retry_backoff=MINUTE)
    svc = succeeded(db, tmp_path, machine)
    svc.gpu.download_errors = [ArtifactCorrupt("sha256 mismatch")]
    first = advance(db, machine, "acme", svc).pointer
    assert (first.state, first.status, svc.gpu.calls["download"]) == ("DOWNLOAD_SAVE", "waiting", 1)
    row = history(db, "training", "acme")[-1]
    assert (row.state, row.ok, row.error) == (
        "DOWNLOAD_SAVE",
        False,
        "ArtifactCorrupt: sha256 mismatch",
    )
    assert "next try of DOWNLOAD_SAVE (visit 2 of 5) due at " in row.note
    assert row.note.endswith("(in 60 s)")
    due_at = retry_due(first.payload, "DOWNLOAD_SAVE")
    assert due_at is not None
    # not due yet: nothing runs, nothing is written, no budget spent
    rows = len(history(db, "training", "acme"))
    early = advance(db, machine, "acme", svc)
    assert (early.steps, svc.gpu.calls["download"]) == (0, 1)
    assert pointer(db, "training", "acme") == first
    assert len(history(db, "training", "acme")) == rows
    clock.forward(61)
    done = advance(db, machine, "acme", svc).pointer
    assert (done.state, svc.gpu.calls["download"], svc.gpu.calls["submit"]) == ("AWAIT_GATE", 2, 1)
    assert RETRY_AT not in done.payload


def test_five_failed_downloads_span_minutes_not_milliseconds(db, tmp_path, clock):
    machine = training_machine(retry_backoff=MINUTE)
    svc = succeeded(db, tmp_path, machine)
    svc.gpu.download_errors = [ConnectionError("reset")] * 5
    waited = []
    pointer_now = advance(db, machine, "acme", svc).pointer
    while pointer_now.state == "DOWNLOAD_SAVE":
        at = retry_due(pointer_now.payload, "DOWNLOAD_SAVE")
        waited.append(round((at - engine._now()).total_seconds()))
        clock.forward(waited[-1] + 1)
        pointer_now = advance(db, machine, "acme", svc).pointer
    assert waited == [60, 120, 240, 240]  # the fifth failure ends the run: no wait for a sixth
    assert pointer_now.state == "FAILED"
    assert "DOWNLOAD_SAVE would exceed its budget of 5" in pointer_now.reason
    assert svc.gpu.calls["submit"] == 1


def test_a_download_failing_for_a_while_then_working_needs_nobody(db, tmp_path, clock):
    machine = training_machine(retry_backoff=Backoff(10, 60, 0.25))
    svc = succeeded(db, tmp_path, machine)
    svc.gpu.download_errors = [ConnectionError("store away")] * 3  # about 30 s of failures
    p = advance(db, machine, "acme", svc).pointer
    while p.state == "DOWNLOAD_SAVE":
        clock.forward(5)  # the sensor's ticks, every 5 s
        p = advance(db, machine, "acme", svc).pointer
    assert p.state == "AWAIT_GATE"
    assert (svc.gpu.calls["download"], svc.gpu.calls["submit"]) == (4, 1)


def test_a_resubmission_after_a_failed_job_waits(db, tmp_path, clock):
    machine = training_machine(retry_backoff=MINUTE)
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC, machine=machine)
    advance(db, machine, "acme", svc)
    svc.gpu.set_status("job-1", JobStatus.FAILED, error="CUDA out of memory")
    waiting = advance(db, machine, "acme", svc).pointer
    assert (waiting.state, svc.gpu.calls["submit"]) == ("SUBMIT_JOB", 1)
    row = history(db, "training", "acme")[-1]
    assert row.state == "JOB_FAILED" and "next try of SUBMIT_JOB (visit 2 of 3) due at" in row.note
    now = dt.datetime.now(dt.UTC)
    assert due([waiting], now) == []  # the sensor leaves it for a later tick
    assert due([waiting], now + dt.timedelta(seconds=61)) == [waiting]
    status = "\n".join(status_lines(db, "acme"))
    assert "last error: remote job job-1 failed (attempt 1): CUDA out of memory" in status
    assert "next try of SUBMIT_JOB (visit 2 of 3) due at" in status
    clock.forward(61)
    assert advance(db, machine, "acme", svc).pointer.state == "POLL_JOB"
    assert svc.gpu.calls["submit"] == 2 and svc.gpu.jobs["job-1"].attempt == 2


def test_a_candidate_run_requested_again_waits_before_it_is_requested(db, tmp_path, clock):
    from retrain_assets.machines.handoff import ATTEMPT, CandidateRun, FactsByCustomer

    machine = training_machine(retry_backoff=MINUTE)
    svc = services(tmp_path)
    svc.gpu.add_job("k1", JobStatus.SUCCEEDED)
    start_training(db, "acme", "k1", SPEC, machine=machine)
    none = FactsByCustomer({("acme", "k1"): HandoffFacts()})
    advance(db, machine, "acme", dataclasses.replace(svc, handoff=none))
    failed = HandoffFacts((CandidateRun(1, "run-1", "FAILURE", True, "boom"),))
    facts = {("acme", "k1"): failed}
    view = dataclasses.replace(svc, handoff=FactsByCustomer(facts))
    p = advance(db, machine, "acme", view).pointer
    assert (p.state, p.payload[ATTEMPT]) == ("AWAIT_CANDIDATE", 2)
    assert "(attempt 2 of 3) to be requested at" in history(db, "training", "acme")[-1].note
    build = lambda c, k, a: f"{c}:{k}:{a}"  # noqa: E731
    assert handoff_requests([p], facts, build) == []  # not yet
    rows = len(history(db, "training", "acme"))
    assert advance(db, machine, "acme", view).steps == 0  # nor is the state visited
    assert len(history(db, "training", "acme")) == rows
    clock.forward(61)
    later = advance(db, machine, "acme", view).pointer
    assert handoff_requests([later], facts, build) == ["acme:k1:2"]
