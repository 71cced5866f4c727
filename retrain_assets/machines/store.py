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


def _prefixed(alias: str) -> str:
    return ", ".join(f"{alias}.{column.strip()}" for column in _HISTORY_COLUMNS.split(","))


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
    """Lock many pointers with one statement; rows another replica holds are left out."""
    cur.execute(
        f"SELECT {_POINTER_COLUMNS} FROM machine_pointers"
        " WHERE machine = %s AND customer = ANY(%s) ORDER BY customer FOR UPDATE SKIP LOCKED",
        (machine, list(customers)),
    )
    return [Pointer(*row) for row in cur.fetchall()]


def existing_customers(
    cur: psycopg2.extensions.cursor, machine: str, customers: Sequence[str]
) -> set[str]:
    """Return which of these customers have a pointer for this machine, locked or not."""
    cur.execute(
        "SELECT customer FROM machine_pointers WHERE machine = %s AND customer = ANY(%s)",
        (machine, list(customers)),
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
