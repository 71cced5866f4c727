import datetime as dt
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg2
import pytest

from retrain_assets.serving.prediction_log import (
    LogRow,
    LogUnavailable,
    PredictionLogWriter,
    copy_lines,
)
from retrain_assets.store.database import connection, transaction
from retrain_assets.store.server import libpq_url
from retrain_assets_tests.support.waiting import wait_until

AT = dt.datetime(2026, 3, 2, 9, 30, tzinfo=dt.UTC)


def log_row(key: str, prediction: float | None = 1.5, **changes) -> LogRow:
    fields = dict(
        customer="acme",
        model_version="3",
        alias="champion",
        served=True,
        request_key=key,
        store_id=key.split("/")[0],
        item_id="I1",
        forecast_date=dt.date(2026, 3, 1),
        prediction=prediction,
        error=None,
        rollout_id=7,
        step="CANARY_10",
        served_at=AT,
    )
    fields.update(changes)
    return LogRow(**fields)


def copy_waits_on_a_lock(url: str) -> bool:
    with transaction(url) as cur:
        cur.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query LIKE 'COPY prediction_log%'"
        )
        return cur.fetchone()[0] == 1


def logged(url: str) -> list[tuple]:
    with transaction(url) as cur:
        cur.execute(
            "SELECT request_key, prediction, error, served, rollout_id, step, served_at "
            "FROM prediction_log ORDER BY id"
        )
        return cur.fetchall()


def test_copy_lines_escape_text_and_keep_non_finite_numbers():
    line = copy_lines([log_row("S1/I1/2026-03-01", math.nan, error="bad\tvalue\nline\\x")])
    fields = line.rstrip("\n").split("\t")
    assert fields[8] == "NaN"
    assert fields[9] == "bad\\tvalue\\nline\\\\x"
    assert copy_lines([log_row("k", -math.inf)]).split("\t")[8] == "-Infinity"
    assert copy_lines([log_row("k", None, rollout_id=None)]).split("\t")[8:11] == [
        "\\N",
        "\\N",
        "\\N",
    ]


def test_rows_are_committed_before_write_returns(serving_db):
    writer = PredictionLogWriter(serving_db)
    writer.start()
    try:
        writer.write(
            [
                log_row("S1/I1/2026-03-01", math.inf),
                log_row("S2/I1/2026-03-01", None, error="model failed:\tno feature weather"),
            ]
        )
        rows = logged(serving_db)  # another connection sees them at once: committed
    finally:
        writer.close()
    assert [row[0] for row in rows] == ["S1/I1/2026-03-01", "S2/I1/2026-03-01"]
    assert rows[0][1] == math.inf and rows[1][1] is None
    assert rows[1][2] == "model failed:\tno feature weather"
    assert rows[0][3:6] == (True, 7, "CANARY_10") and rows[0][6] == AT


def test_requests_waiting_together_share_one_statement(serving_db):
    writer = PredictionLogWriter(serving_db)
    writer.start()
    blocker = psycopg2.connect(libpq_url(serving_db))
    try:
        with blocker.cursor() as cur:  # hold the table: the first batch waits on the lock
            cur.execute("LOCK TABLE prediction_log IN EXCLUSIVE MODE")
        with ThreadPoolExecutor(20) as pool:
            first = pool.submit(writer.write, [log_row("first/I1/2026-03-01")])
            wait_until(
                lambda: copy_waits_on_a_lock(serving_db),
                10,
                "the first COPY to wait",
                interval=0.05,
            )
            rest = [pool.submit(writer.write, [log_row(f"S{n}/I1/2026-03-01")]) for n in range(19)]
            wait_until(
                lambda: writer.received_rows == 20, 10, "19 more requests queued", interval=0.01
            )
            assert not first.done()  # nothing is acknowledged before its commit
            blocker.rollback()  # releases the lock
            for future in [first, *rest]:
                future.result(timeout=30)
        assert writer.batches == 2  # one COPY for the first request, one for the other 19
        assert len(logged(serving_db)) == 20
    finally:
        blocker.close()
        writer.close()


def test_close_commits_everything_queued_and_refuses_more(serving_db):
    writer = PredictionLogWriter(serving_db)
    writer.start()
    blocker = psycopg2.connect(libpq_url(serving_db))
    with blocker.cursor() as cur:
        cur.execute("LOCK TABLE prediction_log IN EXCLUSIVE MODE")
    with ThreadPoolExecutor(5) as pool:
        futures = [pool.submit(writer.write, [log_row(f"S{n}/I1/2026-03-01")]) for n in range(5)]
        wait_until(lambda: writer.received_rows == 5, 10, "writes queued", interval=0.01)
        wait_until(lambda: copy_waits_on_a_lock(serving_db), 10, "a COPY to wait", interval=0.05)
        closing = threading.Thread(target=writer.close)
        closing.start()
        wait_until(lambda: not writer.alive(), 10, "the writer to refuse new rows", interval=0.01)
        with pytest.raises(LogUnavailable, match="shutting down"):
            writer.write([log_row("late/I1/2026-03-01")])
        blocker.rollback()
        blocker.close()
        closing.join(30)
        for future in futures:
            future.result(timeout=30)
    assert sorted(row[0] for row in logged(serving_db)) == [f"S{n}/I1/2026-03-01" for n in range(5)]


def test_a_batch_postgres_refuses_fails_its_requests_without_acknowledging(serving_db):
    writer = PredictionLogWriter(serving_db, retry_delays=(0.01,))
    writer.start()
    try:
        with connection(serving_db) as conn, conn, conn.cursor() as cur:
            cur.execute("ALTER TABLE prediction_log ADD CHECK (prediction < 100)")
        with pytest.raises(LogUnavailable, match="the prediction log is unavailable"):
            writer.write([log_row("S1/I1/2026-03-01", 500.0)])
        writer.write([log_row("S2/I1/2026-03-01", 5.0)])  # the writer carries on
    finally:
        writer.close()
    assert [row[0] for row in logged(serving_db)] == ["S2/I1/2026-03-01"]


def test_a_rows_bounds_are_committed_as_json_and_none_as_null(serving_db):
    bounds = '{"80": [1.0, 4.5], "95": [0.0, 7.25]}'
    assert copy_lines([log_row("k", intervals=bounds)]).rstrip("\n").split("\t")[13] == bounds
    writer = PredictionLogWriter(serving_db)
    writer.start()
    try:
        writer.write([log_row("S1/I1/2026-03-01", intervals=bounds), log_row("S2/I1/2026-03-01")])
    finally:
        writer.close()
    with transaction(serving_db) as cur:
        cur.execute("SELECT request_key, intervals FROM prediction_log ORDER BY id")
        rows = cur.fetchall()
    assert rows == [
        ("S1/I1/2026-03-01", {"80": [1.0, 4.5], "95": [0.0, 7.25]}),
        ("S2/I1/2026-03-01", None),
    ]
