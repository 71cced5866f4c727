import datetime as dt

from retrain_assets.cli import main
from retrain_assets.machines import advance
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets.runtime.machine_report import history_lines, status_lines
from retrain_assets_tests.machines.fakes import FakeGpu, MemoryCandidates
from retrain_assets_tests.machines.training_services import SPEC, services


def test_status_says_where_each_customer_is_why_and_what_budget_is_left(db, tmp_path):
    gpu = FakeGpu()
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", services(tmp_path, gpu, MemoryCandidates()))
    down = FakeGpu()
    down.down = True
    start_training(db, "bolt", "k2", {**SPEC, "customer": "bolt"})
    for _ in range(3):  # three submissions, each in its own advance once due
        advance(db, training_machine(), "bolt", services(tmp_path, down))

    lines = status_lines(db, now=dt.datetime.now(dt.UTC))
    acme = next(line for line in lines if line.startswith("acme "))
    assert "training" in acme and "POLL_JOB" in acme and "waiting" in acme
    assert "run k1, job job-1, 99 visit(s) left in POLL_JOB" in acme
    assert any(line.startswith("    last step: run k1 POLL_JOB visit 1 yielded") for line in lines)
    bolt = lines[lines.index(next(line for line in lines if line.startswith("bolt "))) + 1]
    assert bolt.startswith("    why: max retries reached: SUBMIT_JOB would exceed its budget")
    assert status_lines(db, "nobody") == ["no state machine has run for nobody yet"]


def test_history_lists_every_visit_of_a_run_oldest_first(db, tmp_path):
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", services(tmp_path))
    lines = history_lines(db, "acme")
    assert [line.split()[5] for line in lines] == [
        "INITIAL",
        "CHECK_LAST_TRAIN",
        "SUBMIT_JOB",
        "POLL_JOB",
    ]
    assert "SUBMIT_JOB visit 1 -> POLL_JOB: job job-1 attempt 1" in lines[2]
    assert history_lines(db, "acme", run_key="other") == ["no history for acme"]


def test_status_and_history_commands_print_the_same(db, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RETRAIN_APP_PG_URL", db)
    start_training(db, "acme", "k1", SPEC)
    advance(db, training_machine(), "acme", services(tmp_path))
    assert main(["status", "--customer", "acme"]) == 0
    assert "POLL_JOB" in capsys.readouterr().out
    assert main(["history", "acme", "--machine", "training"]) == 0
    assert "SUBMIT_JOB visit 1 -> POLL_JOB" in capsys.readouterr().out
    assert main(["history", "../x"]) == 2
    assert "not a safe slug" in capsys.readouterr().err
