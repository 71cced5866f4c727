"""Moving a customer's pointer by hand: an operator's repair, recorded like any other move.

The engine moves pointers only through the table; a person who repairs a stuck customer moves
one to a named state of that table instead. The move is one history row (visit 0: not a
visit of any state) whose note says who moved it, from where, and why, committed with the
pointer under its row lock. History stays append-only: the repair is added, nothing rewritten.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from retrain_assets.machines import store
from retrain_assets.machines.engine import NoRun
from retrain_assets.machines.runs import MachineBusy
from retrain_assets.machines.table import Machine
from retrain_assets.store.database import transaction


class UnknownState(ValueError):
    """The named state is not a state of the machine's table."""


def check_state(machine: Machine, target: str) -> None:
    """Refuse a state the table does not have, listing the ones it has.

    Raises:
        UnknownState: `target` is neither a state nor a terminal state of the table.
    """
    known = [*machine.states, *sorted(machine.terminal)]
    if target not in known:
        raise UnknownState(
            f"{machine.name} has no state {target!r}; its states are {', '.join(known)}"
        )


def repoint(
    url: str,
    machine: Machine,
    customer: str,
    target: str,
    note: str,
    *,
    payload: Mapping[str, Any] | None = None,
    drop: Iterable[str] = (),
) -> store.Pointer:
    """Move the customer's pointer to `target`, keeping its run key; return the new pointer.

    Every visit budget starts afresh (the operator's move is a new start from that state).
    A non-terminal target is left "waiting", so the machine's sensor advances it on its next
    tick; a terminal target ends the run with `note` as its reason.

    Args:
        url: the project database.
        machine: the table the pointer runs on.
        customer: whose pointer.
        target: a state of the table.
        note: who moved it and why, for the history row (and the reason of a terminal move).
        payload: keys to set in the run's payload.
        drop: payload keys to remove (e.g. counters that belong to the state being left).

    Raises:
        UnknownState: `target` is not a state of the table.
        NoRun: the customer has no pointer for this machine.
        MachineBusy: another process holds the pointer right now.
    """
    check_state(machine, target)
    with transaction(url) as cur:
        current = store.read_pointer(cur, machine.name, customer, lock=True)
        if current is None:
            if store.read_pointer(cur, machine.name, customer) is None:
                raise NoRun(f"no {machine.name} run was started for {customer}")
            raise MachineBusy(f"{machine.name} for {customer} is being advanced; try again")
        dropped = set(drop)
        body = {k: v for k, v in current.payload.items() if k not in dropped}
        ends = target in machine.terminal
        moved = dataclasses.replace(
            current,
            state=target,
            status="terminal" if ends else "waiting",
            payload={**body, **(payload or {})},
            visits={},
            reason=note if ends else None,
        )
        now = dt.datetime.now(dt.UTC)
        store.append_history(
            cur,
            current,
            store.NewHistory(current.state, 0, True, False, target, None, note, now, now),
        )
        return store.save_pointer(cur, moved)
