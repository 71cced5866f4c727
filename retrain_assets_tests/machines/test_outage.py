"""An unreachable training service while a job runs (issue 31): recorded once, ended by time.

A status call that fails otherwise (issue 38: a refused token, a 500 with a body, an answer
that does not parse) is not an outage: a failed poll with its text, spending its visit.
"""

import datetime as dt
import json

import pytest

from retrain_assets.gpu.client import GpuServiceError
from retrain_assets.gpu.protocol import JobStatus
from retrain_assets.gpu.slurm.rest import SlurmRestError, UnknownJob
from retrain_assets.machines import advance, history, pointer
from retrain_assets.machines.outage import (
    STATUS_FAILED,
    UNREACHABLE_SINCE,
    ServiceDown,
    StatusUnread,
    classify,
    is_unreachable,
    needs_outage_visit,
)
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets.runtime.machine_report import status_lines
from retrain_assets_tests.machines.training_services import SPEC, services


def polling(db, tmp_path, machine):
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC, machine=machine)
    advance(db, machine, "acme", svc)
    return svc


def test_what_counts_as_unreachable():
    assert is_unreachable(GpuServiceError("GET", "/jobs/j", None, "connection refused"))
    assert is_unreachable(GpuServiceError("GET", "/jobs/j", 503, "database away"))
    assert is_unreachable(ConnectionError("reset"))
    assert not is_unreachable(GpuServiceError("GET", "/jobs/j", 404, "no job j"))
    assert not is_unreachable(ValueError("bad json"))


def test_the_first_failed_poll_is_recorded_and_status_says_since_when(db, tmp_path):
    machine = training_machine()
    svc = polling(db, tmp_path, machine)
    svc.gpu.down = True
    p = advance(db, machine, "acme", svc).pointer
    assert (p.state, p.status, p.visits["POLL_JOB"]) == ("POLL_JOB", "waiting", 2)
    assert p.last_error.startswith("training service unreachable since ")
    since = dt.datetime.fromisoformat(p.payload[UNREACHABLE_SINCE])
    assert not needs_outage_visit(p.payload, since + dt.timedelta(seconds=60), 3600)
    assert needs_outage_visit(p.payload, since + dt.timedelta(seconds=3601), 3600)
    status = "\n".join(status_lines(db, "acme"))
    assert "    last error: training service unreachable since " in status
    svc.gpu.down = False
    svc.gpu.set_status("job-1", JobStatus.RUNNING)
    back = advance(db, machine, "acme", svc).pointer
    assert (back.last_error, back.payload[UNREACHABLE_SINCE]) == (None, None)
    assert history(db, "training", "acme")[-1].note.startswith(
        "training service reachable again (unreachable since "
    )
    assert "unreachable" not in "\n".join(status_lines(db, "acme")).split("last step")[0]


def test_an_outage_past_its_limit_ends_the_run_with_when_it_began(db, tmp_path):
    machine = training_machine(outage_limit=600)
    svc = polling(db, tmp_path, machine)
    start = dt.datetime.now(dt.UTC)
    first = {STATUS_FAILED: ServiceDown(start, "GPU service POST /jobs/status -> None: refused")}
    assert advance(db, machine, "acme", svc, prefetched=first).pointer.state == "POLL_JOB"
    later = ServiceDown(start + dt.timedelta(seconds=300), "refused")
    waits = advance(db, machine, "acme", svc, prefetched={STATUS_FAILED: later}).pointer
    assert waits.state == "POLL_JOB" and waits.last_error.startswith("training service unreachable")
    late = ServiceDown(start + dt.timedelta(seconds=601), "refused")
    ended = advance(db, machine, "acme", svc, prefetched={STATUS_FAILED: late}).pointer
    assert (ended.state, ended.status) == ("FAILED", "terminal")
    assert ended.reason.startswith("training service unreachable since ")
    assert "(601 s, over the outage limit of 600 s)" in ended.reason
    assert svc.gpu.calls["submit"] == 1
    assert pointer(db, "training", "acme").visits["POLL_JOB"] == 4


AT = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "error",
    [
        GpuServiceError("POST", "/jobs/status", None, "ConnectionError: refused"),
        GpuServiceError("POST", "/jobs/status", 502, "bad gateway"),
        GpuServiceError("POST", "/jobs/status", 503, "database away"),
        GpuServiceError("POST", "/jobs/status", 504, "gateway timeout"),
        ConnectionRefusedError("refused"),
        TimeoutError("timed out"),
        SlurmRestError("GET /jobs", None, "Unable to contact slurm controller", (-1,)),
    ],
)
def test_no_answer_is_an_outage(error):
    assert classify(error, AT) == ServiceDown(AT, f"{type(error).__name__}: {error}")


@pytest.mark.parametrize(
    "error",
    [
        GpuServiceError("POST", "/jobs/status", 401, '{"detail":"bad token"}'),
        GpuServiceError("POST", "/jobs/status", 403, "forbidden"),
        GpuServiceError("POST", "/jobs/status", 404, "Not Found"),
        GpuServiceError("POST", "/jobs/status", 500, "Internal Server Error"),
        SlurmRestError("GET /jobs", 401, "not a JSON object: 'Authentication failure'"),
        SlurmRestError("GET /jobs", 404, "not a JSON object: 'Unable find requested URL'"),
        UnknownJob("GET /job/7", 500, "Invalid job id specified", (2017,)),
        json.JSONDecodeError("Expecting value", "<html>", 0),
        KeyError("jobs"),
        TypeError("'NoneType' object is not subscriptable"),
    ],
)
def test_an_answer_or_a_bug_is_a_failed_poll_with_its_text(error):
    failure = classify(error, AT)
    assert failure == StatusUnread(AT, f"{type(error).__name__}: {error}")
    assert failure.error.startswith(type(error).__name__ + ": ")


def test_a_single_poll_refused_is_a_failed_visit_not_an_outage(db, tmp_path):
    machine = training_machine(poll_budget=3)
    svc = polling(db, tmp_path, machine)

    def refused(job_id):
        raise GpuServiceError("GET", f"/jobs/{job_id}", 401, '{"detail":"invalid token"}')

    svc.gpu.get = refused
    p = advance(db, machine, "acme", svc).pointer
    assert (p.state, p.status, p.visits["POLL_JOB"]) == ("POLL_JOB", "waiting", 2)
    assert p.payload.get(UNREACHABLE_SINCE) is None
    assert p.last_error == (
        "status of job job-1 not read (not an outage): GpuServiceError: "
        'GPU service GET /jobs/job-1 -> 401: {"detail":"invalid token"}'
    )
    assert "    last error: status of job job-1 not read (not an outage): GpuServiceError" in (
        "\n".join(status_lines(db, "acme"))
    )
    advance(db, machine, "acme", svc)  # each failed poll spends a visit, as any failure does
    ended = advance(db, machine, "acme", svc).pointer
    assert (ended.state, ended.visits["POLL_JOB"]) == ("FAILED", 3)
    assert ended.reason.startswith("max retries reached: POLL_JOB would exceed its budget of 3")
    assert ended.reason.endswith('-> 401: {"detail":"invalid token"}')


def test_a_batch_that_was_not_read_fails_the_poll_and_ends_an_outage(db, tmp_path):
    machine = training_machine()
    svc = polling(db, tmp_path, machine)
    asked = svc.gpu.calls["get"]
    down = ServiceDown(AT, "GpuServiceError: GPU service POST /jobs/status -> 503: away")
    advance(db, machine, "acme", svc, prefetched={STATUS_FAILED: down})
    unread = StatusUnread(AT, "JSONDecodeError: Expecting value: line 1 column 1 (char 0)")
    p = advance(db, machine, "acme", svc, prefetched={STATUS_FAILED: unread}).pointer
    assert (p.state, p.visits["POLL_JOB"], p.payload[UNREACHABLE_SINCE]) == ("POLL_JOB", 3, None)
    assert p.last_error == (
        "status of job job-1 not read (not an outage): JSONDecodeError: Expecting value: "
        "line 1 column 1 (char 0)"
    )
    last = history(db, "training", "acme")[-1]
    assert (last.ok, last.error) == (False, p.last_error)
    assert last.note.startswith("training service reachable again (unreachable since ")
    assert svc.gpu.calls["get"] == asked  # the batch's failure is the poll's: no call of its own
