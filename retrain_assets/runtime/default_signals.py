"""Run a command with the default action for the stop signals, whatever this process inherited.

A process started from a job runner, `nohup` or a script's `cmd &` may inherit SIGTERM, SIGINT,
SIGHUP or SIGQUIT as *ignored*, and an ignored disposition survives `exec`: a child of `up`
would then shrug off the SIGTERM that asks it to stop, and only the SIGKILL after the grace
period would end it (no clean shutdown, a 20 s stop). `Popen` restores only SIGPIPE and
SIGXFSZ, and its `preexec_fn` is unsafe in a process with threads, so children are started
through this tiny launcher instead: `python -m retrain_assets.runtime.default_signals CMD...`
resets the four signals and replaces itself with CMD (same pid, so nothing else changes).
With `--parent PID` it first arms a parent-death signal (`retrain_assets.parent_death`): `up`'s
children get SIGTERM when `up` dies, even of SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

from retrain_assets.parent_death import ParentGone, die_with_parent

PARENT_FLAG = "--parent"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def with_default_signals(argv: Sequence[str], die_with_parent: bool = False) -> list[str]:
    """Return the command line that runs `argv` with the stop signals at their defaults.

    With `die_with_parent` the command gets SIGTERM when this process dies; build the command
    line and start it in the same thread (the signal follows the thread that forked).
    """
    parent = [PARENT_FLAG, str(os.getpid())] if die_with_parent else []
    return [sys.executable, "-m", __name__, *parent, *argv]


def main(argv: Sequence[str]) -> None:
    """Reset the stop signals to their default action and exec `argv` in this process."""
    usage = "usage: python -m retrain_assets.runtime.default_signals [--parent PID] CMD [ARG...]"
    args = list(argv)
    if args[:1] == [PARENT_FLAG]:
        if len(args) < 2 or not args[1].isdigit():
            raise SystemExit(usage)
        try:
            die_with_parent(int(args[1]))
        except ParentGone as gone:
            raise SystemExit(f"not starting {args[2:3]}: {gone}") from None
        args = args[2:]
    if not args:
        raise SystemExit(usage)
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    os.execvp(args[0], args)


if __name__ == "__main__":
    main(sys.argv[1:])
