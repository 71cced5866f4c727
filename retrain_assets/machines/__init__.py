"""State machines persisted in Postgres: the table, the flat trampoline, runs and queries."""

from retrain_assets.machines.engine import AdvanceResult, NoRun, advance, advance_many
from retrain_assets.machines.repoint import UnknownState, repoint
from retrain_assets.machines.runs import MachineBusy, RunActive, start_run
from retrain_assets.machines.step import Context, Step
from retrain_assets.machines.store import (
    HistoryRow,
    Pointer,
    history,
    pointer,
    pointers_in_state,
    unfinished_pointers,
)
from retrain_assets.machines.table import Machine, MachineDefinitionError, State

__all__ = [
    "AdvanceResult",
    "Context",
    "HistoryRow",
    "Machine",
    "MachineBusy",
    "MachineDefinitionError",
    "NoRun",
    "Pointer",
    "RunActive",
    "State",
    "Step",
    "UnknownState",
    "advance",
    "advance_many",
    "history",
    "pointer",
    "pointers_in_state",
    "repoint",
    "start_run",
    "unfinished_pointers",
]
