"""An operator's move of a pointer: only to a state of the table, recorded, history kept."""

import psycopg2
import pytest

from retrain_assets.machines import NoRun, UnknownState, advance, history, pointer, repoint
from retrain_assets.machines.handoff import ATTEMPT, TRIES
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets.store.database import transaction
from retrain_assets_tests.machines.training_services import SPEC, services


def test_a_move_is_one_history_row_with_the_note_and_fresh_budgets(db, tmp_path):
    machine = training_machine(poll_budget=2)
    start_training(db, "acme", "k1", SPEC, machine=machine)
    svc = services(tmp_path)
    for _ in range(3):
        advance(db, machine, "acme", svc)
    failed = pointer(db, "training", "acme")
    assert failed.state == "FAILED" and failed.visits["POLL_JOB"] == 2
    moved = repoint(
        db,
        machine,
        "acme",
        "POLL_JOB",
        "reset by ana: the job was only slow",
        drop=[ATTEMPT, TRIES],
    )
    assert (moved.state, moved.status, moved.visits, moved.reason) == (
        "POLL_JOB",
        "waiting",
        {},
        None,
    )
    assert moved.payload == {"spec": SPEC, "job_id": "job-1"} and moved.run_key == "k1"
    row = history(db, "training", "acme")[-1]
    assert (row.state, row.visit, row.ok, row.next_state, row.note) == (
        "FAILED",
        0,
        True,
        "POLL_JOB",
        "reset by ana: the job was only slow",
    )
    assert advance(db, machine, "acme", svc).waiting  # its budget starts again
    with pytest.raises(psycopg2.Error, match="append-only"), transaction(db) as cur:
        cur.execute("UPDATE machine_history SET note = 'rewritten' WHERE id = %s", (row.id,))


def test_a_terminal_target_ends_the_run_with_the_note_as_reason(db, tmp_path):
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", services(tmp_path))
    ended = repoint(db, training_machine(), "acme", "FAILED", "reset by bo: abandoned")
    assert (ended.state, ended.status, ended.reason) == (
        "FAILED",
        "terminal",
        "reset by bo: abandoned",
    )


def test_unknown_states_and_customers_are_refused_and_nothing_moves(db, tmp_path):
    start_training(db, "acme", "k1", SPEC)
    with pytest.raises(UnknownState, match="training has no state 'POLLING'; its states are"):
        repoint(db, training_machine(), "acme", "POLLING", "x")
    with pytest.raises(NoRun, match="no training run was started for bolt"):
        repoint(db, training_machine(), "bolt", "POLL_JOB", "x")
    assert pointer(db, "training", "acme").state == "INITIAL"
    assert history(db, "training", "acme") == []
