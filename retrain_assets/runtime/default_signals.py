"""Run a command with the default action for the stop signals, whatever this process inherited.

A process started from a job runner, `nohup` or a script's `cmd &` may inherit SIGTERM, SIGINT,
SIGHUP or SIGQUIT as *ignored*, and an ignored disposition survives `exec`: a child of `up`
would then shrug off the SIGTERM that asks it to stop, and only the SIGKILL after the grace
period would end it (no clean shutdown, a 20 s stop). `Popen` restores only SIGPIPE and
SIGXFSZ, and its `preexec_fn` is unsafe in a process with threads, so children are started
through this tiny launcher instead: `python -m retrain_assets.runtime.default_signals CMD...`
resets the four signals and replaces itself with CMD (same pid, so nothing else changes).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def with_default_signals(argv: Sequence[str]) -> list[str]:
    """Return the command line that runs `argv` with the stop signals at their defaults."""
    return [sys.executable, "-m", __name__, *argv]


def main(argv: Sequence[str]) -> None:
    """Reset the stop signals to their default action and exec `argv` in this process."""
    if not argv:
        raise SystemExit("usage: python -m retrain_assets.runtime.default_signals CMD [ARG...]")
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    os.execvp(argv[0], list(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
