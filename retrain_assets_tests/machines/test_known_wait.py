"""The poll that waits, recorded in SQL (`known_wait`), against the trampoline it replaces.

Twins: customers `a<i>` and `b<i>` run the same run key, so they attach to the same remote
job and their machines stand exactly alike. The `a`s advance through the trampoline, the
`b`s with their pointers `known`, and every row both wrote must be the same, minus ids and
timestamps: that is the proof that the SQL path writes what the engine would have written.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dagster as dg
import pytest

import retrain_assets.automation.gpu_job_poller as poller
from retrain_assets.automation.gpu_job_poller import gpu_job_poller
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.gpu.protocol import JobStatus
from retrain_assets.machines import (
    Machine,
    MachineDefinitionError,
    State,
    Step,
    advance,
    advance_many,
    engine,
    history,
    pointer,
    start_run,
    store,
)
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets.store.database import transaction
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets_tests.machines.fakes import FakeGpu
from retrain_assets_tests.machines.toy_machines import TERMINAL, Toy
from retrain_assets_tests.machines.training_services import (
    GPU,
    SPEC,
    FakeGpuResource,
    services,
)

# One pair of twins per case; the trampoline must run for all but the first two.
CASES = ["queued", "running", "succeeded", "failed", "cancelled", "unbatched", "spent", "stale"]
FAST = {"queued", "running"}


def comparable(db: str, customer: str) -> tuple[Any, list[tuple[Any, ...]]]:
    """A run's pointer and history without customer, ids and timestamps."""
    p = pointer(db, "training", customer)
    assert p is not None
    rows = [
        (h.run_key, h.state, h.visit, h.ok, h.yielded, h.next_state, h.error, h.note)
        for h in history(db, "training", customer)
    ]
    return (p.run_key, p.state, p.status, p.payload, p.visits, p.reason, p.last_error), rows


@pytest.fixture
def spied(monkeypatch) -> list[str]:
    """Record whose trampoline runs (the path every visit took before `known_wait`)."""
    ran: list[str] = []
    real = engine._trampoline

    def trampoline(record, machine, p, services, prefetched):  # type: ignore[no-untyped-def]
        ran.append(p.customer)
        return real(record, machine, p, services, prefetched)

    monkeypatch.setattr(engine, "_trampoline", trampoline)
    return ran


def known_pointers(db: str) -> dict[str, store.Pointer]:
    """Read the pointers as the sensor's due list does."""
    return {p.customer: p for p in store.unfinished_pointers(db, "training")}


def test_the_sql_wait_writes_exactly_what_the_trampoline_writes(db, tmp_path, spied):
    machine = training_machine(poll_budget=3)
    svc = services(tmp_path)
    jobs = {case: svc.gpu.add_job(f"k-{case}", JobStatus.QUEUED) for case in CASES}
    for case in CASES:
        for twin in "ab":
            start_training(db, f"{twin}-{case}", f"k-{case}", SPEC, machine=machine)
            assert advance(db, machine, f"{twin}-{case}", svc).waiting  # POLL_JOB, visit 1
    for twin in "ab":  # "spent" has used all 3 polls: its next visit is over the budget
        for _ in range(2):
            advance(db, machine, f"{twin}-spent", svc)
    svc.gpu.advance(jobs["running"].id, JobStatus.RUNNING, rounds_done=3)
    svc.gpu.finish(jobs["succeeded"].id)
    svc.gpu.set_status(jobs["failed"].id, JobStatus.FAILED, error="CUDA out of memory")
    svc.gpu.set_status(jobs["cancelled"].id, JobStatus.CANCELLED, error="preempted")
    batch = svc.gpu.statuses([job.id for case, job in jobs.items() if case != "unbatched"])
    known = known_pointers(db)
    for twin in "ab":  # changed after the due list was read: `known` is stale for "stale"
        advance(db, machine, f"{twin}-stale", svc)
    spied.clear()

    a = advance_many(db, machine, [f"a-{c}" for c in CASES], svc, prefetched=batch)
    b = advance_many(db, machine, [f"b-{c}" for c in CASES], svc, prefetched=batch, known=known)

    assert sorted(spied) == sorted([f"a-{c}" for c in CASES] + [f"b-{c}" for c in CASES[2:]])
    for case in CASES:
        assert comparable(db, f"b-{case}") == comparable(db, f"a-{case}"), case
        assert b[f"b-{case}"].pointer == pointer(db, "training", f"b-{case}"), case
        assert b[f"b-{case}"].steps == a[f"a-{case}"].steps, case
    notes = {case: history(db, "training", f"b-{case}")[-1].note for case in FAST}
    assert notes == {"queued": "queued 0/10 rounds", "running": "running 3/10 rounds"}
    assert pointer(db, "training", "b-spent").reason.startswith(
        "max retries reached: POLL_JOB would exceed its budget of 3 visits"
    )


def test_the_budget_still_ends_the_run_when_every_poll_took_the_sql_path(db, tmp_path, spied):
    machine = training_machine(poll_budget=3)
    svc = services(tmp_path)
    start_training(db, "acme", "k1", SPEC, machine=machine)
    advance(db, machine, "acme", svc)  # POLL_JOB visit 1 (the trampoline)
    spied.clear()
    for _ in range(3):
        batch = svc.gpu.statuses(["job-1"])
        advance_many(db, machine, ["acme"], svc, prefetched=batch, known=known_pointers(db))
    polls = [(h.visit, h.ok, h.note) for h in history(db, "training", "acme")[-4:]]
    assert polls == [
        (1, True, "queued 0/10 rounds"),
        (2, True, "queued 0/10 rounds"),
        (3, True, "queued 0/10 rounds"),
        (4, False, "not run"),
    ]
    assert spied == ["acme"]  # only the visit over the budget ran the trampoline
    ended = pointer(db, "training", "acme")
    assert (ended.state, ended.status, ended.visits["POLL_JOB"]) == ("FAILED", "terminal", 3)
    assert ended.reason.startswith("max retries reached: POLL_JOB would exceed its budget of 3")


def waiting_pointer(db: str, tmp_path, customer: str = "acme") -> store.Pointer:
    """Start a training run and leave it waiting in POLL_JOB on job-1; return its pointer."""
    start_training(db, customer, f"{customer}-k", SPEC)
    advance(db, training_machine(), customer, services(tmp_path, gpu=FakeGpu()))
    found = pointer(db, "training", customer)
    assert found is not None and found.state == "POLL_JOB"
    return found


def record(db: str, p: store.Pointer, budget: int | None = 100) -> list[tuple[Any, ...]]:
    """Record one wait of p's POLL_JOB, as read in p, in its own transaction."""
    wait = store.KnownWait(p.customer, p.updated_at, "queued 0/10 rounds")
    with transaction(db) as cur:
        return store.record_waits(cur, "training", "POLL_JOB", budget, [wait])


def test_record_waits_takes_only_a_pointer_unchanged_in_its_state_below_the_budget(db, tmp_path):
    p = waiting_pointer(db, tmp_path)
    assert record(db, p, budget=1) == []  # its one poll is the budget
    ((customer, visit, at),) = record(db, p, budget=None)
    assert (customer, visit) == ("acme", 2)
    assert pointer(db, "training", "acme").updated_at == at
    assert record(db, p) == []  # p is stale now: the pointer moved since it was read
    with transaction(db) as cur:  # an operator's move, as `repoint` writes it
        cur.execute(
            "UPDATE machine_pointers SET state = 'AWAIT_GATE', updated_at = %s"
            " WHERE customer = 'acme'",
            (at,),
        )
    assert record(db, pointer(db, "training", "acme")) == []  # same stamp, not in POLL_JOB
    assert [h.visit for h in history(db, "training", "acme") if h.state == "POLL_JOB"] == [1, 2]


def test_a_pointer_another_replica_holds_is_left_to_the_trampoline_and_reported_busy(
    db, tmp_path, spied
):
    held, free = waiting_pointer(db, tmp_path, "held"), waiting_pointer(db, tmp_path, "free")
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction(db) as cur:
            cur.execute("SELECT 1 FROM machine_pointers WHERE customer = 'held' FOR UPDATE")
            holding.set()
            assert release.wait(10)

    gpu = FakeGpu()
    gpu.add_job("held-k", JobStatus.QUEUED)  # job-1 of this fake, the id both pointers hold
    svc = services(tmp_path, gpu=gpu)
    with ThreadPoolExecutor(1) as pool:
        holder = pool.submit(hold)
        assert holding.wait(10)
        spied.clear()
        results = advance_many(
            db,
            training_machine(),
            ["held", "free"],
            svc,
            prefetched=gpu.statuses(["job-1"]),
            known={"held": held, "free": free},
        )
        release.set()
        holder.result(10)
    assert (results["held"].busy, results["held"].pointer) == (True, None)
    assert results["free"].waiting and results["free"].steps == 1
    assert spied == []  # the busy one was looked at by the lock, never run
    assert [h.visit for h in history(db, "training", "held")][-1] == 1  # nothing recorded


def never_sure(payload: Any, prefetched: Any) -> str | None:
    raise KeyError("job_id")


def wait_forever(ctx: Any) -> Step:
    return Step.wait("not yet")


def test_a_known_wait_that_raises_leaves_the_visit_to_the_transition(db, spied):
    waits = State(wait_forever, "DONE", "FAILED", may_yield=True, known_wait=never_sure)
    machine = Machine("toy", "WAIT", TERMINAL, {"WAIT": waits})
    start_run(db, machine, "c00", "k")
    known = {"c00": pointer(db, "toy", "c00")}
    assert advance_many(db, machine, ["c00"], Toy(), known=known)["c00"].waiting
    assert spied == ["c00"]
    assert [h.note for h in history(db, "toy", "c00")] == ["not yet"]


def test_only_a_state_that_may_yield_can_have_a_known_wait():
    with pytest.raises(MachineDefinitionError, match="WAIT has a known_wait but may not yield"):
        Machine(
            "toy",
            "WAIT",
            TERMINAL,
            {"WAIT": State(wait_forever, "DONE", "FAILED", known_wait=never_sure)},
        )


def poller_tick(db: str, instance: dg.DagsterInstance) -> dg.SensorResult:
    """Evaluate `gpu_job_poller` once against the module's fake GPU service."""
    resources = {
        "project_db": ProjectDatabase(url=db),
        "gpu_service": FakeGpuResource(),
        "partition_storage": PartitionStorage(),
    }
    return gpu_job_poller(dg.build_sensor_context(instance=instance, resources=resources))


@pytest.fixture
def two_polling(db, tmp_path, monkeypatch) -> list[str]:
    """acme and umbrella waiting in POLL_JOB on job-1 and job-2 of the module's fake GPU."""
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    GPU.__init__()
    customers = ["acme", "umbrella"]
    for customer in customers:
        start_training(db, customer, f"{customer}-k", SPEC)
        advance(db, training_machine(), customer, services(tmp_path, gpu=GPU))
    return customers


def test_a_poller_tick_records_its_waiting_polls_without_the_trampoline(
    db, dagster_instance, two_polling, spied
):
    GPU.advance("job-2", JobStatus.RUNNING, rounds_done=4)
    spied.clear()
    result = poller_tick(db, dagster_instance)
    assert spied == [] and not result.run_requests and not result.asset_events
    polls = {c: [(h.visit, h.note) for h in history(db, "training", c)][-2:] for c in two_polling}
    assert polls == {
        "acme": [(1, "queued 0/10 rounds"), (2, "queued 0/10 rounds")],
        "umbrella": [(1, "queued 0/10 rounds"), (2, "running 4/10 rounds")],
    }
    assert GPU.calls == {"find": 2, "submit": 2, "get": 2, "statuses": 1}


def test_an_outage_is_recorded_on_its_first_tick_then_left_alone_until_it_ends(
    db, dagster_instance, two_polling
):
    before = {c: pointer(db, "training", c) for c in two_polling}
    GPU.down = True
    assert not poller_tick(db, dagster_instance).run_requests
    assert GPU.calls["statuses"] == 1  # asked once; no poll fell back to asking alone
    first = {c: pointer(db, "training", c) for c in two_polling}
    rows = {c: history(db, "training", c) for c in two_polling}
    for c in two_polling:
        assert first[c].last_error.startswith("training service unreachable since ")
        assert first[c].visits["POLL_JOB"] == before[c].visits["POLL_JOB"] + 1
        assert (rows[c][-1].ok, rows[c][-1].error) == (False, first[c].last_error)
    for _ in range(3):  # the rest of the outage: no row, no visit spent
        assert not poller_tick(db, dagster_instance).run_requests
    assert {c: pointer(db, "training", c) for c in two_polling} == first
    assert {c: history(db, "training", c) for c in two_polling} == rows
    GPU.down = False
    poller_tick(db, dagster_instance)
    for c in two_polling:
        back = pointer(db, "training", c)
        assert (back.state, back.last_error, back.payload["unreachable_since"]) == (
            "POLL_JOB",
            None,
            None,
        )
        note = history(db, "training", c)[-1].note
        assert note.startswith("training service reachable again (unreachable since ")
        assert note.endswith("; queued 0/10 rounds")


def test_polls_advance_slice_by_slice_and_a_job_that_succeeded_is_requested_in_the_tick(
    db, dagster_instance, two_polling, monkeypatch
):
    monkeypatch.setattr(poller, "STATUS_SLICE", 1)  # one poll a slice: two status calls
    GPU.set_status("job-2", JobStatus.SUCCEEDED)
    result = poller_tick(db, dagster_instance)
    assert [r.run_key for r in result.run_requests or []] == ["candidate-umbrella-k-1"]
    assert GPU.calls["statuses"] == 2
    assert [h.note for h in history(db, "training", "acme")][-1] == "queued 0/10 rounds"
    assert pointer(db, "training", "umbrella").state == "AWAIT_CANDIDATE"


def test_a_status_batch_that_fails_leaves_the_polls_after_it_for_the_next_tick(
    db, dagster_instance, two_polling, monkeypatch
):
    monkeypatch.setattr(poller, "STATUS_SLICE", 1)
    answered = GPU.statuses

    def first_only(job_ids: list[str]) -> dict[str, Any]:
        if GPU.calls["statuses"]:
            GPU.down = True  # the service goes away after its first answer
        return answered(job_ids)

    monkeypatch.setattr(GPU, "statuses", first_only)
    untouched = pointer(db, "training", "umbrella")
    assert not poller_tick(db, dagster_instance).run_requests
    assert [h.visit for h in history(db, "training", "acme")][-1] == 2
    down = pointer(db, "training", "umbrella")  # the outage recorded, once: no status taken
    assert down.visits == {**untouched.visits, "POLL_JOB": untouched.visits["POLL_JOB"] + 1}
    assert down.last_error.startswith("training service unreachable since ")
    assert down.payload["job_id"] == untouched.payload["job_id"]
