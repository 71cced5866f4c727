"""A child that outlives its supervisor holds ports, sockets and the database: it must not.

On Linux `prctl(PR_SET_PDEATHSIG)` asks the kernel to send a signal to this process when its
parent dies, however the parent dies (SIGKILL included). It fires when the parent *thread* that
forked this process exits, so the supervisor starts its children from its main thread. The
setting survives `exec` (not of a set-user-id program), so a launcher sets it and then execs
the real command: `python -m retrain_assets.parent_death PARENT_PID CMD...`. Elsewhere (macOS)
there is no such call and this does nothing; `up`'s reaper (runtime/reaper.py) still stops
what is left.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class ParentGone(RuntimeError):
    """The parent died before the death signal was armed: the child must not start."""


def die_with_parent(parent_pid: int, sig: signal.Signals = signal.SIGTERM) -> bool:
    """Arm `sig` for when the parent dies; return False where the platform has no such call.

    Raises:
        ParentGone: `parent_pid` is no longer this process's parent (it died before the
            call), so the signal would never come.
        OSError: prctl refused.
    """
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")
    if os.getppid() != parent_pid:
        raise ParentGone(f"parent {parent_pid} exited before this process started")
    return True


def launcher(argv: Sequence[str]) -> list[str]:
    """Return the command line that runs `argv`, ended with SIGTERM when this process dies.

    Call it in the thread that starts the child (see the module's docstring).
    """
    return [sys.executable, "-m", __name__, str(os.getpid()), *argv]


def main(argv: Sequence[str]) -> None:
    """Arm the death signal against PARENT_PID, then exec CMD in this process."""
    if len(argv) < 2 or not argv[0].isdigit():
        raise SystemExit("usage: python -m retrain_assets.parent_death PARENT_PID CMD [ARG...]")
    try:
        die_with_parent(int(argv[0]))
    except ParentGone as gone:
        raise SystemExit(f"not starting {argv[1]}: {gone}") from None
    os.execvp(argv[1], list(argv[1:]))


if __name__ == "__main__":
    main(sys.argv[1:])
