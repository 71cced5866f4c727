"""One `up` per RETRAIN_HOME: a second one would run a second daemon on the same instance.

Two dagster-daemons on one instance would both tick every sensor and launch runs twice; a
different RETRAIN_WEBSERVER_PORT would let a second `up` past the port check, so the home
itself is locked. The kernel releases the lock when `up` exits, however it exits.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_FILE = "up.lock"


class HomeInUse(RuntimeError):
    """Another `up` holds this RETRAIN_HOME."""


def lock_home(home: Path) -> IO[str]:
    """Lock `home` for this process and return the open lock file; keep it open while running.

    Raises:
        HomeInUse: another process holds the lock; the message names its pid.
    """
    home.mkdir(parents=True, exist_ok=True)
    handle = (home / LOCK_FILE).open("a+")  # not inherited by children (close-on-exec)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        owner = handle.read().strip() or "unknown"
        handle.close()
        raise HomeInUse(
            f"another `retrain-assets up` (pid {owner}) is running for {home}; stop it first "
            "(`retrain-assets down`) or set RETRAIN_HOME to another folder"
        ) from None
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle
