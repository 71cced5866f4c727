"""The machines' rows in Postgres: one pointer per (machine, customer), an append-only history.

State is data, not memory in a worker: any replica can resume any run from its pointer, and
the history says what every visit did and why the run ended where it did.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import psycopg2.extensions
from psycopg2.extras import Json, execute_values

from retrain_assets.store.database import one_row, transaction

Status = Literal["ready", "waiting", "terminal"]

_POINTER_COLUMNS = """machine, customer, run_key, state, status, payload, visits, reason,
    last_error, started_at, updated_at"""
_HISTORY_COLUMNS = """id, machine, customer, run_key, state, visit, ok, yielded, next_state,
    error, note, started_at, finished_at"""


@dataclass(frozen=True)
class Pointer:
    """Where one customer's run of one machine is.

    `status` is "ready" (started, not advanced yet), "waiting" (yielded) or "terminal";
    `reason` says why a terminal run ended; `visits` counts visits per state in this run.
    """

    machine: str
    customer: str
    run_key: str
    state: str
    status: Status
    payload: dict[str, Any]
    visits: dict[str, int]
    reason: str | None
    last_error: str | None
    started_at: dt.datetime
    updated_at: dt.datetime

    @property
    def terminal(self) -> bool:
        """Return True when the run has ended (nothing left to advance)."""
        return self.status == "terminal"


@dataclass(frozen=True)
class HistoryRow:
    """One visit of one state (or one visit refused for being over budget)."""

    id: int
    machine: str
    customer: str
    run_key: str
    state: str
    visit: int
    ok: bool
    yielded: bool
    next_state: str
    error: str | None
    note: str | None
    started_at: dt.datetime
    finished_at: dt.datetime


@dataclass(frozen=True)
class NewHistory:
    """A history row about to be appended (the database assigns its id)."""

    state: str
    visit: int
    ok: bool
    yielded: bool
    next_state: str
    error: str | None
    note: str | None
    started_at: dt.datetime
    finished_at: dt.datetime


def pointer(url: str, machine: str, customer: str) -> Pointer | None:
    """Return the customer's pointer for this machine, if a run was ever started."""
    with transaction(url) as cur:
        return read_pointer(cur, machine, customer)


def pointers_in_state(url: str, machine: str, state: str) -> list[Pointer]:
    """Return every pointer of this machine sitting in `state` (e.g. runs waiting in POLL_JOB)."""
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_POINTER_COLUMNS} FROM machine_pointers"
            " WHERE machine = %s AND state = %s ORDER BY updated_at, customer",
            (machine, state),
        )
        return [Pointer(*row) for row in cur.fetchall()]


def customer_pointers(url: str, customer: str | None = None) -> list[Pointer]:
    """Return every machine's pointer (or one customer's), by customer then machine."""
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_POINTER_COLUMNS} FROM machine_pointers"
            " WHERE %s::text IS NULL OR customer = %s ORDER BY customer, machine",
            (customer, customer),
        )
        return [Pointer(*row) for row in cur.fetchall()]


def unfinished_pointers(url: str, machine: str) -> list[Pointer]:
    """Return every pointer of this machine that is not terminal, oldest update first."""
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_POINTER_COLUMNS} FROM machine_pointers"
            " WHERE machine = %s AND status <> 'terminal' ORDER BY updated_at, customer",
            (machine,),
        )
        return [Pointer(*row) for row in cur.fetchall()]


def latest_notes(url: str, pointers: Sequence[Pointer]) -> dict[tuple[str, str], HistoryRow]:
    """Return the newest history row of each pointer's current run, keyed (machine, customer)."""
    if not pointers:
        return {}
    keys = [(p.machine, p.customer, p.run_key) for p in pointers]
    with transaction(url) as cur:
        cur.execute(
            f"SELECT DISTINCT ON (h.machine, h.customer) {_prefixed('h')}"
            " FROM machine_history h JOIN unnest(%s::text[], %s::text[], %s::text[])"
            " AS k(machine, customer, run_key)"
            " ON h.machine = k.machine AND h.customer = k.customer AND h.run_key = k.run_key"
            " ORDER BY h.machine, h.customer, h.id DESC",
            tuple(list(column) for column in zip(*keys, strict=True)),
        )
        return {(row[1], row[2]): HistoryRow(*row) for row in cur.fetchall()}


def _prefixed(alias: str, columns: str = _HISTORY_COLUMNS) -> str:
    return ", ".join(f"{alias}.{column.strip()}" for column in columns.split(","))


def history(url: str, machine: str, customer: str, run_key: str | None = None) -> list[HistoryRow]:
    """Return the customer's history rows for this machine, oldest first (one run if keyed)."""
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_HISTORY_COLUMNS} FROM machine_history"
            " WHERE machine = %s AND customer = %s AND (%s::text IS NULL OR run_key = %s)"
            " ORDER BY id",
            (machine, customer, run_key, run_key),
        )
        return [HistoryRow(*row) for row in cur.fetchall()]


def read_pointer(
    cur: psycopg2.extensions.cursor, machine: str, customer: str, *, lock: bool = False
) -> Pointer | None:
    """Read a pointer; with `lock`, take its row lock or return None at once if another has it."""
    suffix = " FOR UPDATE SKIP LOCKED" if lock else ""
    cur.execute(
        f"SELECT {_POINTER_COLUMNS} FROM machine_pointers"
        f" WHERE machine = %s AND customer = %s{suffix}",
        (machine, customer),
    )
    row = cur.fetchone()
    return Pointer(*row) if row else None


def insert_pointer(
    cur: psycopg2.extensions.cursor,
    machine: str,
    customer: str,
    run_key: str,
    state: str,
    payload: dict[str, Any],
) -> bool:
    """Create a ready pointer unless one exists; return True when this call created it."""
    cur.execute(
        "INSERT INTO machine_pointers (machine, customer, run_key, state, status, payload)"
        " VALUES (%s, %s, %s, %s, 'ready', %s) ON CONFLICT (machine, customer) DO NOTHING",
        (machine, customer, run_key, state, Json(payload)),
    )
    return cur.rowcount == 1


def reset_pointer(
    cur: psycopg2.extensions.cursor,
    machine: str,
    customer: str,
    run_key: str,
    state: str,
    payload: dict[str, Any],
) -> None:
    """Point a locked pointer at a new run: initial state, fresh payload, no visits."""
    cur.execute(
        "UPDATE machine_pointers SET run_key = %s, state = %s, status = 'ready', payload = %s,"
        " visits = '{}', reason = NULL, last_error = NULL, started_at = clock_timestamp(),"
        " updated_at = clock_timestamp() WHERE machine = %s AND customer = %s",
        (run_key, state, Json(payload), machine, customer),
    )


def save_pointer(cur: psycopg2.extensions.cursor, p: Pointer) -> Pointer:
    """Write a locked pointer's new position and return it as stored."""
    cur.execute(
        "UPDATE machine_pointers SET state = %s, status = %s, payload = %s, visits = %s,"
        " reason = %s, last_error = %s, updated_at = clock_timestamp()"
        f" WHERE machine = %s AND customer = %s RETURNING {_POINTER_COLUMNS}",
        (
            p.state,
            p.status,
            Json(p.payload),
            Json(p.visits),
            p.reason,
            p.last_error,
            p.machine,
            p.customer,
        ),
    )
    return Pointer(*one_row(cur))


def append_history(cur: psycopg2.extensions.cursor, p: Pointer, row: NewHistory) -> None:
    """Append one history row for the pointer's run."""
    cur.execute(
        "INSERT INTO machine_history (machine, customer, run_key, state, visit, ok, yielded,"
        " next_state, error, note, started_at, finished_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            p.machine,
            p.customer,
            p.run_key,
            row.state,
            row.visit,
            row.ok,
            row.yielded,
            row.next_state,
            row.error,
            row.note,
            row.started_at,
            row.finished_at,
        ),
    )


def lock_pointers(
    cur: psycopg2.extensions.cursor, machine: str, customers: Sequence[str]
) -> list[Pointer]:
    """Lock many pointers with one statement; rows another replica holds are left out.

    One primary-key probe per customer (a LATERAL lookup): with `customer = ANY(...)` a
    planner without statistics read every pointer of the machine for each chunk (most of the
    39 % this select took of a tick at 100,000 customers).
    """
    cur.execute(
        f"SELECT {_prefixed('m', _POINTER_COLUMNS)}"
        " FROM unnest(%s::text[]) AS c(customer) CROSS JOIN LATERAL ("
        f"  SELECT {_POINTER_COLUMNS} FROM machine_pointers"
        "   WHERE machine = %s AND customer = c.customer LIMIT 1 FOR UPDATE SKIP LOCKED"
        " ) m ORDER BY m.customer",
        (list(customers), machine),
    )
    return [Pointer(*row) for row in cur.fetchall()]


def existing_customers(
    cur: psycopg2.extensions.cursor, machine: str, customers: Sequence[str]
) -> set[str]:
    """Return which of these customers have a pointer for this machine, locked or not."""
    cur.execute(
        "SELECT c.customer FROM unnest(%s::text[]) AS c(customer) WHERE EXISTS ("
        " SELECT 1 FROM machine_pointers m WHERE m.machine = %s AND m.customer = c.customer)",
        (list(customers), machine),
    )
    return {row[0] for row in cur.fetchall()}


def append_histories(
    cur: psycopg2.extensions.cursor, rows: Sequence[tuple[Pointer, NewHistory]]
) -> None:
    """Append many history rows with one multi-row INSERT."""
    if not rows:
        return
    execute_values(
        cur,
        "INSERT INTO machine_history (machine, customer, run_key, state, visit, ok, yielded,"
        " next_state, error, note, started_at, finished_at) VALUES %s",
        [
            (
                p.machine,
                p.customer,
                p.run_key,
                r.state,
                r.visit,
                r.ok,
                r.yielded,
                r.next_state,
                r.error,
                r.note,
                r.started_at,
                r.finished_at,
            )
            for p, r in rows
        ],
        page_size=max(len(rows), 1),
    )


@dataclass(frozen=True)
class KnownWait:
    """A visit its caller knows will wait in place: whose, the pointer as read, the step's note."""

    customer: str
    seen: dt.datetime  # the `updated_at` the caller read; any write since changes it
    note: str


# One statement: lock the pointers still as read, count the visit, append its history row.
# Each pointer is locked through its primary key alone, in a LATERAL lookup, so the plan is
# one index probe per customer whatever the statistics say: given any predicate on `state`,
# a planner without statistics (before the first ANALYZE) took the (machine, state) index
# and read every pointer of the machine once per customer or per chunk. The state, status
# and budget are checked on the locked row instead.
_RECORD_WAITS = """
WITH due AS (
    SELECT * FROM unnest(%(customers)s::text[], %(seen)s::timestamptz[], %(notes)s::text[])
        AS d(customer, seen, note)
), locked AS MATERIALIZED (
    SELECT m.tid
    FROM due CROSS JOIN LATERAL (
        SELECT m.ctid AS tid, m.state, m.status, m.visits
        FROM machine_pointers m
        WHERE m.machine = %(machine)s AND m.customer = due.customer AND m.updated_at = due.seen
        LIMIT 1 FOR UPDATE SKIP LOCKED
    ) m
    WHERE m.state = %(state)s AND m.status <> 'terminal'
      AND (%(budget)s::int IS NULL OR COALESCE((m.visits ->> %(state)s)::int, 0) < %(budget)s)
), moved AS (
    UPDATE machine_pointers m
    SET status = 'waiting', reason = NULL, updated_at = clock_timestamp(),
        visits = m.visits || jsonb_build_object(%(state)s,
            COALESCE((m.visits ->> %(state)s)::int, 0) + 1)
    WHERE m.ctid = ANY(ARRAY(SELECT tid FROM locked))  -- the rows just locked, as they are
    RETURNING m.customer, m.run_key, (m.visits ->> %(state)s)::int AS visit, m.updated_at
)
INSERT INTO machine_history (machine, customer, run_key, state, visit, ok, yielded,
    next_state, error, note, started_at, finished_at)
SELECT %(machine)s, moved.customer, moved.run_key, %(state)s, moved.visit, true, true,
    %(state)s, NULL, due.note, moved.updated_at, moved.updated_at
FROM moved JOIN due ON due.customer = moved.customer
RETURNING customer, visit, finished_at
"""


def record_waits(
    cur: psycopg2.extensions.cursor,
    machine: str,
    state: str,
    budget: int | None,
    waits: Sequence[KnownWait],
) -> list[tuple[str, int, dt.datetime]]:
    """Record one visit of `state` that waits in place, for many pointers, in one statement.

    Only a pointer that is unchanged since its caller read it (same `updated_at`), in `state`,
    not terminal and below `budget` visits is taken, under its row lock (`FOR UPDATE SKIP
    LOCKED`, so a row another replica holds is left out); its visit is counted, `updated_at`
    stamped, and its history row appended: the row `engine._visit` writes for a
    `Step.wait(note)`. Returns (customer, visit, updated_at) of each one recorded; the others
    are the caller's to advance the usual way.
    """
    if not waits:
        return []
    cur.execute(
        _RECORD_WAITS,
        {
            "customers": [w.customer for w in waits],
            "seen": [w.seen for w in waits],
            "notes": [w.note for w in waits],
            "machine": machine,
            "state": state,
            "budget": budget,
        },
    )
    return [(customer, visit, at) for customer, visit, at in cur.fetchall()]


def save_pointers(cur: psycopg2.extensions.cursor, pointers: Sequence[Pointer]) -> list[Pointer]:
    """Write many locked pointers with one `UPDATE ... FROM (VALUES ...)`; return them stored."""
    if not pointers:
        return []
    stored = execute_values(
        cur,
        "UPDATE machine_pointers AS m SET state = v.state, status = v.status,"
        " payload = v.payload, visits = v.visits, reason = v.reason,"
        " last_error = v.last_error, updated_at = clock_timestamp()"
        " FROM (VALUES %s) AS v(machine, customer, state, status, payload, visits, reason,"
        " last_error) WHERE m.machine = v.machine AND m.customer = v.customer"
        f" RETURNING {', '.join('m.' + c.strip() for c in _POINTER_COLUMNS.split(','))}",
        [
            (
                p.machine,
                p.customer,
                p.state,
                p.status,
                Json(p.payload),
                Json(p.visits),
                p.reason,
                p.last_error,
            )
            for p in pointers
        ],
        template="(%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::text, %s::text)",
        page_size=len(pointers),
        fetch=True,
    )
    return [Pointer(*row) for row in stored]
