"""The hand-off states on real Postgres, fed the facts a sensor tick would have fetched."""

import dataclasses

from retrain_assets.gpu.protocol import JobStatus
from retrain_assets.machines import advance, history, pointer
from retrain_assets.machines.handoff import (
    ATTEMPT,
    TRIES,
    CandidateRun,
    FactsByCustomer,
    HandoffFacts,
    RecordedVerdict,
)
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets_tests.machines.training_services import SPEC, services

KEY = "k1"


def run(attempt, status="STARTED", failure=None):
    finished = status in ("SUCCESS", "FAILURE", "CANCELED")
    return CandidateRun(attempt, f"run-{attempt}", status, finished, failure)


def with_facts(svc, **facts):
    return dataclasses.replace(svc, handoff=FactsByCustomer({("acme", KEY): HandoffFacts(**facts)}))


def succeeded_job(db, tmp_path):
    """A run whose GPU job finished: one advance more and it enters the hand-off."""
    svc = services(tmp_path)
    start_training(db, "acme", KEY, SPEC)
    advance(db, training_machine(), "acme", svc)
    svc.gpu.set_status("job-1", JobStatus.SUCCEEDED)
    return svc


def notes(db):
    return [(h.state, h.next_state, h.note, h.error) for h in history(db, "training", "acme")]


def test_a_finished_job_requests_attempt_one_and_waits_while_its_run_runs(db, tmp_path):
    svc = succeeded_job(db, tmp_path)
    entered = advance(db, training_machine(), "acme", with_facts(svc))
    assert (entered.waiting, entered.pointer.state) == (True, "AWAIT_CANDIDATE")
    assert (entered.pointer.payload[ATTEMPT], entered.pointer.payload[TRIES]) == (1, 1)
    assert notes(db)[-1][2] == f"requesting candidate-{KEY}-1 for the candidate run"
    # asked again before the run exists (a tick evaluated twice): the same attempt
    again = advance(db, training_machine(), "acme", with_facts(svc))
    assert again.pointer.payload[ATTEMPT] == 1
    assert notes(db)[-1][2] == (
        f"waiting for the candidate run: candidate-{KEY}-1 requested, not launched yet"
    )
    busy = advance(db, training_machine(), "acme", with_facts(svc, runs=(run(1),)))
    assert busy.pointer.payload[ATTEMPT] == 1
    assert notes(db)[-1][2] == (
        f"waiting for the candidate run: candidate-{KEY}-1 is run run-1 (STARTED)"
    )


def test_a_failed_or_cancelled_candidate_run_is_requested_again_then_the_run_fails(db, tmp_path):
    svc = succeeded_job(db, tmp_path)
    advance(db, training_machine(), "acme", with_facts(svc))
    first = (run(1, "FAILURE", "OperationalError: could not connect to server"),)
    retried = advance(db, training_machine(), "acme", with_facts(svc, runs=first))
    assert (retried.pointer.state, retried.pointer.payload[ATTEMPT]) == ("AWAIT_CANDIDATE", 2)
    assert notes(db)[-1][2].startswith(
        f"candidate-{KEY}-1 (run run-1) ended FAILURE before the candidate run was recorded: "
        f"OperationalError: could not connect to server; candidate-{KEY}-2 (attempt 2 of 3) "
        "to be requested at "
    )
    second = (run(2, "CANCELED"), *first)
    advance(db, training_machine(), "acme", with_facts(svc, runs=second))
    assert pointer(db, "training", "acme").payload[ATTEMPT] == 3
    third = (run(3, "FAILURE", "MlflowException: 503"), *second)
    ended = advance(db, training_machine(), "acme", with_facts(svc, runs=third)).pointer
    assert (ended.state, ended.status) == ("FAILED", "terminal")
    assert ended.reason == (
        "hand-off budget spent: 3 of 3 candidate run(s) requested, none completed; last: "
        f"candidate-{KEY}-3 (run run-3) ended FAILURE before the candidate run was recorded: "
        "MlflowException: 503"
    )
    assert notes(db)[-1][:2] == ("AWAIT_CANDIDATE", "FAILED")


def test_the_candidate_run_downloads_then_the_gate_verdict_ends_the_run(db, tmp_path):
    svc = succeeded_job(db, tmp_path)
    advance(db, training_machine(), "acme", with_facts(svc))
    fetched = advance(db, training_machine(), "acme", dataclasses.replace(svc, fetching=True))
    assert (fetched.pointer.state, svc.gpu.calls["download"]) == ("AWAIT_GATE", 1)
    # the run goes on to the gate; the sensor sees a pass, not registered yet, run still going
    passed = RecordedVerdict(True, "candidate WAPE 0.30 beats seasonal naive WAPE 0.36")
    waiting = advance(
        db, training_machine(), "acme", with_facts(svc, runs=(run(1),), verdict=passed)
    )
    assert waiting.pointer.state == "AWAIT_GATE"
    assert notes(db)[-1][2] == (
        f"waiting for the registration: candidate-{KEY}-1 is run run-1 (STARTED)"
    )
    done = advance(
        db,
        training_machine(),
        "acme",
        with_facts(
            svc,
            runs=(run(1, "SUCCESS"),),
            verdict=passed,
            registered_version="4",
        ),
    ).pointer
    assert (done.state, done.reason) == (
        "DONE",
        "registered as version 4; gate passed: candidate WAPE 0.30 beats seasonal naive WAPE 0.36",
    )


def test_a_failed_gate_ends_the_run_done_without_another_attempt(db, tmp_path):
    svc = succeeded_job(db, tmp_path)
    svc.candidates.saved[("acme", KEY)] = object()
    advance(db, training_machine(), "acme", with_facts(svc))  # POLL_JOB -> AWAIT_CANDIDATE
    advance(db, training_machine(), "acme", dataclasses.replace(svc, fetching=True))
    lost = RecordedVerdict(False, "candidate WAPE 0.2893 does not beat challenger WAPE 0.2763")
    done = advance(
        db,
        training_machine(),
        "acme",
        with_facts(
            svc,
            runs=(run(1, "FAILURE", "DagsterAssetCheckFailedError"),),
            verdict=lost,
        ),
    ).pointer
    assert (done.state, done.reason) == ("DONE", f"gate failed, nothing registered: {lost.reason}")
    assert notes(db)[-1][:2] == ("AWAIT_GATE", "DONE")


def test_a_passed_gate_whose_registration_failed_is_requested_again(db, tmp_path):
    svc = succeeded_job(db, tmp_path)
    advance(db, training_machine(), "acme", with_facts(svc))
    advance(db, training_machine(), "acme", dataclasses.replace(svc, fetching=True))
    passed = RecordedVerdict(True, "beats")
    failed = (run(1, "FAILURE", "MlflowException: registry unavailable"),)
    again = advance(db, training_machine(), "acme", with_facts(svc, runs=failed, verdict=passed))
    assert (again.pointer.state, again.pointer.payload[ATTEMPT]) == ("AWAIT_GATE", 2)
    assert "before the registration was recorded" in notes(db)[-1][2]


def test_a_new_incarnation_never_reuses_an_attempt_dagster_has_seen(db, tmp_path):
    """A run restarted (retry, reset) numbers on from the instance's runs: its keys are new."""
    svc = succeeded_job(db, tmp_path)
    earlier = (run(2, "FAILURE"), run(1, "FAILURE"))  # of an earlier incarnation of this key
    entered = advance(db, training_machine(), "acme", with_facts(svc, runs=earlier))
    assert (entered.pointer.payload[ATTEMPT], entered.pointer.payload[TRIES]) == (3, 1)


def test_the_visit_budget_bounds_the_wait_for_a_run_that_never_comes(db, tmp_path):
    machine = training_machine(handoff_budget=2)
    svc = services(tmp_path)
    start_training(db, "acme", KEY, SPEC, machine=machine)
    svc.gpu.add_job(KEY, JobStatus.SUCCEEDED)
    assert advance(db, machine, "acme", with_facts(svc)).pointer.state == "AWAIT_CANDIDATE"
    assert advance(db, machine, "acme", with_facts(svc)).waiting
    ended = advance(db, machine, "acme", with_facts(svc)).pointer
    assert ended.state == "FAILED"
    assert ended.reason == (
        "max retries reached: AWAIT_CANDIDATE would exceed its budget of 2 visits"
    )


def test_without_facts_a_hand_off_state_waits_for_the_sensor(db, tmp_path):
    """Inside a Dagster run (no facts) nothing is requested and no attempt is used."""
    svc = services(tmp_path)
    svc.gpu.add_job(KEY, JobStatus.SUCCEEDED)
    start_training(db, "acme", KEY, SPEC)
    result = advance(db, training_machine(), "acme", svc)
    assert result.pointer.state == "AWAIT_CANDIDATE" and ATTEMPT not in result.pointer.payload
    assert notes(db)[-1][2] == ("waiting for the candidate run; the sensor requests and follows it")
