"""Dagster run workers forked from a process that has the code location loaded.

Dagster's code server starts each run as a `multiprocessing` process with the "spawn" method:
a fresh interpreter that imports Dagster and `retrain_assets.definitions` again, about 2 s of
CPU per run on a 2-core machine before the run's first step (the import alone; measured in
docs/decisions.md). The platform launches a run per customer per hand-off step, so on a
loaded host that import is most of what a run costs. With "forkserver" and the code location
preloaded, the server process imports it once and every run is a fork of it.

Opt-in (RETRAIN_RUN_WORKERS=forkserver). The forkserver starts when the code server loads the
code location, not at its first run: started by the first run, its import of the code location
happened inside Dagster's StartRun call, whose deadline is 60 s, and on a machine at load 10-15
that call timed out and failed the run (docs/decisions.md).

Dagster itself does this for the multiprocess executor's steps (`start_method: forkserver`,
`preload_modules`), not for the code server's runs: the server picks "spawn" in its
constructor. `install_run_workers` overrides that choice on the server class, in the code
server process only (where the code location is imported).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
from multiprocessing.context import BaseContext

from retrain_assets.dagster_private import MP_CONTEXT_ATTRIBUTE, code_server_class
from retrain_assets.settings_model import current_settings

PRELOAD = ("retrain_assets.definitions",)


def run_start_method() -> str:
    """Return how run workers start: RETRAIN_RUN_WORKERS, "spawn" (Dagster's own) by default.

    Raises:
        SettingsError: the setting is neither "forkserver" nor "spawn" (or another is bad).
    """
    return current_settings().run_workers


def run_worker_context(method: str) -> BaseContext:
    """Return the multiprocessing context run workers start from, preloaded for forkserver."""
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(list(PRELOAD))
    return context


def install_run_workers() -> bool:
    """Make this process's Dagster code server start runs with `run_start_method()`.

    Only where Dagster's server module is already loaded (the code server imports it before
    the code location); elsewhere, and with "spawn", nothing changes. Returns whether the
    server class now starts runs from the forkserver.
    """
    method = run_start_method()
    server_class = code_server_class()
    if method == "spawn" or server_class is None:
        return False
    context = run_worker_context(method)
    # The constructor assigns the context to an attribute; a data descriptor on the class wins
    # over the instance attribute, so the assignment is ignored and every start uses this one.
    chosen = property(lambda _server: context, lambda _server, _value: None)
    setattr(server_class, MP_CONTEXT_ATTRIBUTE, chosen)
    # Start it now: it imports the code location while the server is idle, and returns at once.
    multiprocessing.forkserver.ensure_running()
    return True
