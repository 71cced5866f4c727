"""Starting a run: one active run per customer per machine, keyed by the run key.

The run key is the idempotency key of the whole pipeline, so starting the same key twice must
be harmless, and starting a different key over an unfinished run must be refused loudly
rather than silently abandon a GPU job that is still being paid for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg2.extensions

from retrain_assets.machines import store
from retrain_assets.machines.table import Machine
from retrain_assets.store.database import transaction


class RunActive(RuntimeError):
    """Another run of this machine is still in progress for the customer."""


class MachineBusy(RuntimeError):
    """Another process holds the customer's pointer right now; try again later."""


def start_run(
    url: str,
    machine: Machine,
    customer: str,
    run_key: str,
    payload: Mapping[str, Any] | None = None,
    *,
    retry: bool = False,
) -> store.Pointer:
    """Point the customer's machine at a new run and return the pointer.

    Same run key again: nothing changes (the current pointer is returned), except that
    `retry` restarts a run of that key which ended in the machine's failed state (an
    operator's decision). Terminal pointer and a new key: reset to the initial state with the
    new payload and no visits. Unfinished run of another key: `RunActive`.

    Raises:
        RunActive: a different run key is still in progress for this customer.
        MachineBusy: the pointer is being advanced and the call would have to change it.
    """
    body = dict(payload or {})
    with transaction(url) as cur:
        if store.insert_pointer(cur, machine.name, customer, run_key, machine.initial, body):
            return _read(cur, machine.name, customer)
        current = store.read_pointer(cur, machine.name, customer, lock=True)
        if current is None:
            current = _read(cur, machine.name, customer)
            if current.run_key == run_key:
                return current
            raise MachineBusy(
                f"{machine.name} for {customer} is being advanced (run {current.run_key});"
                f" cannot start run {run_key} now"
            )
        restart_failed = retry and current.state == machine.failed
        if current.run_key == run_key and not restart_failed:
            return current
        if current.run_key != run_key and not current.terminal:
            raise RunActive(
                f"{machine.name} for {customer} is still running {current.run_key}"
                f" (state {current.state}); refusing to start {run_key}"
            )
        store.reset_pointer(cur, machine.name, customer, run_key, machine.initial, body)
        return _read(cur, machine.name, customer)


def _read(cur: psycopg2.extensions.cursor, machine: str, customer: str) -> store.Pointer:
    found = store.read_pointer(cur, machine, customer)
    if found is None:  # the row was inserted or locked by this very transaction
        raise RuntimeError(f"pointer of {machine} for {customer} vanished")
    return found
