"""An unreachable training service while a job runs (issue 31): recorded once, ended by time."""

import datetime as dt

from retrain_assets.gpu.client import GpuServiceError
from retrain_assets.gpu.protocol import JobStatus
from retrain_assets.machines import advance, history, pointer
from retrain_assets.machines.outage import (
    SERVICE_DOWN,
    UNREACHABLE_SINCE,
    ServiceDown,
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
    first = {SERVICE_DOWN: ServiceDown(start, "GPU service POST /jobs/status -> None: refused")}
    assert advance(db, machine, "acme", svc, prefetched=first).pointer.state == "POLL_JOB"
    later = ServiceDown(start + dt.timedelta(seconds=300), "refused")
    waits = advance(db, machine, "acme", svc, prefetched={SERVICE_DOWN: later}).pointer
    assert waits.state == "POLL_JOB" and waits.last_error.startswith("training service unreachable")
    late = ServiceDown(start + dt.timedelta(seconds=601), "refused")
    ended = advance(db, machine, "acme", svc, prefetched={SERVICE_DOWN: late}).pointer
    assert (ended.state, ended.status) == ("FAILED", "terminal")
    assert ended.reason.startswith("training service unreachable since ")
    assert "(601 s, over the outage limit of 600 s)" in ended.reason
    assert svc.gpu.calls["submit"] == 1
    assert pointer(db, "training", "acme").visits["POLL_JOB"] == 4
