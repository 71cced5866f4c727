"""Keep SIGTERM able to stop the processes the tests start, however pytest itself was started.

A shell starts a background job (`cmd &` in a script, a CI runner's step) with SIGINT ignored,
and pytest and its xdist workers inherit that. Each in-process Dagster execution
(`dg.materialize`, `execute_in_process`, a sensor's run) then maps SIGTERM to SIGINT's handler
when it ends (`dagster._utils.interrupts.setup_interrupt_handlers`), so SIGTERM becomes ignored
in the worker. An ignored disposition survives `exec`: every process a later test starts with
plain `Popen` (a slurmrestd, a dummy `up` child) shrugs off SIGTERM, `terminate()` times out,
and a stop waits out its grace period for SIGKILL. Seen in a clean-clone `.ci/run` started in the
background: a slurmrestd that never stopped and a reaping test that saw SIGKILL, not SIGTERM.

Restoring SIGINT's default handler in each pytest process (controller and workers) at start
keeps Dagster's mapping harmless: SIGTERM then gets Python's handler, which `exec` resets.
"""

from __future__ import annotations

import signal


def restore_stop_signals() -> list[str]:
    """Give back the default action to SIGINT and SIGTERM where this process ignores them.

    Returns the names of the signals restored (empty when nothing was ignored).
    """
    restored = []
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        restored.append("SIGINT")
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        restored.append("SIGTERM")
    return restored
