"""What `retrain-assets status` and `retrain-assets history` print, from the machine tables.

An operator must never need SQL to learn why a customer stopped: the status line gives each
machine's state, why it is there, the visits its state has left and the last thing it did;
the history gives every visit of a run, as recorded.
"""

from __future__ import annotations

import datetime as dt

from retrain_assets.machines.store import (
    HistoryRow,
    Pointer,
    customer_pointers,
    history,
    latest_notes,
)
from retrain_assets.runtime.machine_catalog import MACHINES


def visits_left(p: Pointer) -> int | None:
    """Return how many more visits the pointer's state may have (None: unlimited or unknown)."""
    factory = MACHINES.get(p.machine)
    state = factory().states.get(p.state) if factory else None
    if state is None or state.max_visits is None:
        return None
    return max(state.max_visits - p.visits.get(p.state, 0), 0)


def status_lines(
    url: str, customer: str | None = None, now: dt.datetime | None = None
) -> list[str]:
    """Return one block per (customer, machine): state, why, budget left and the last step."""
    pointers = customer_pointers(url, customer)
    if not pointers:
        return [f"no state machine has run{f' for {customer}' if customer else ''} yet"]
    now = now or dt.datetime.now(dt.UTC)
    last = latest_notes(url, pointers)
    lines = []
    for p in pointers:
        left = visits_left(p)
        budget = "" if left is None else f", {left} visit(s) left in {p.state}"
        job = f", job {p.payload['job_id']}" if "job_id" in p.payload else ""
        lines.append(
            f"{p.customer:<20} {p.machine:<9} {p.state:<16} {p.status:<8} run {p.run_key}"
            f"{job}{budget}, updated {_ago(now - p.updated_at)} ago"
        )
        if p.reason:
            lines.append(f"    why: {p.reason}")
        elif p.last_error:
            lines.append(f"    last error: {p.last_error}")
        row = last.get((p.machine, p.customer))
        if row is not None and not p.reason:
            lines.append(f"    last step: {_describe(row)}")
    return lines


def history_lines(
    url: str, customer: str, machine: str | None = None, run_key: str | None = None
) -> list[str]:
    """Return every recorded visit of the customer's machines, oldest first, one line each."""
    names = [machine] if machine else sorted(MACHINES)
    lines = []
    for name in names:
        rows = history(url, name, customer, run_key)
        for row in rows:
            lines.append(f"{row.finished_at:%Y-%m-%d %H:%M:%S}  {name:<9} {_describe(row)}")
    return lines or [f"no history for {customer}{f' in {machine}' if machine else ''}"]


def _describe(row: HistoryRow) -> str:
    move = "yielded" if row.yielded else f"-> {row.next_state}"
    said = (row.error if not row.ok else None, row.note)  # a failed retry: error, when it is due
    text = "; ".join(part for part in said if part)
    detail = f": {text}" if text else ""
    return f"run {row.run_key} {row.state} visit {row.visit} {move}{detail}"


def _ago(delta: dt.timedelta) -> str:
    seconds = max(int(delta.total_seconds()), 0)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"
