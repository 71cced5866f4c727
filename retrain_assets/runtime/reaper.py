"""`up`'s reaper: when `up` dies without stopping its platform, it stops what `up` left.

The parent-death signal (`retrain_assets.parent_death`) tells each child that `up` is gone, but
not what the child started in its group (a code server's runs), not the embedded Postgres
(started through pg_ctl, no child of the supervisor), and no child that ignores SIGTERM. So
`up` starts this small process in a session of its own, holding the read end of a pipe whose
write end only `up` holds. The kernel closes that end when `up` exits, however it exits; the
reaper then reads `$RETRAIN_HOME/platform.json`. A clean stop removed the file first, and there
is nothing to do; otherwise the reaper stops every recorded group (SIGTERM, SIGKILL after the
grace period), then Postgres, and removes the file, so the next `up` on the home starts clean.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from retrain_assets.runtime.platform_file import (
    RecordedProcess,
    read_platform_file,
    remove_platform_file,
)
from retrain_assets.runtime.reaping import StopReport, stop_platform_processes
from retrain_assets.store.server import forget_handle

DEFAULT_GRACE_SECONDS = 20.0
EXIT_SECONDS = 10.0  # how long a dying `up` may still look alive after its descriptors closed


def start_reaper(
    home: Path, log: Path, grace: float = DEFAULT_GRACE_SECONDS
) -> tuple[subprocess.Popen[bytes], int]:
    """Start the reaper for this process (`up`) and `home`; return it and the pipe's write end.

    `grace`: seconds between its SIGTERM and SIGKILL of a recorded group.

    Keep the write end open while the platform runs and never hand it to a child (Python's
    descriptors are not inherited); close it after a clean stop removed the platform file.
    """
    read_end, write_end = os.pipe()
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log.open("ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(os.getpid()), str(home), str(grace)],
                stdin=read_end,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the terminal's Ctrl-C and a group kill pass it by
            )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return process, write_end


def _gone(up: RecordedProcess, seconds: float = EXIT_SECONDS) -> bool:
    """Return whether `up` has exited, waiting out its exit for up to `seconds`.

    The kernel closes a dying process's descriptors (the reaper's end of file) before the
    process shows as exited: read at once, a SIGKILLed `up` could still look alive (measured:
    1 in 3 under load), and the reaper left everything running.
    """
    deadline = time.monotonic() + seconds
    while up.is_running():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def reap(up_pid: int, home: Path, grace: float, say: Callable[[str], None]) -> StopReport | None:
    """Stop what `up_pid` recorded for `home` if it died without a clean stop.

    Returns None (and touches nothing) when the file is gone, belongs to another `up`, or its
    `up` still runs.
    """
    record = read_platform_file(home)
    if record is None or record.up.pid != up_pid or not _gone(record.up):
        return None
    report = stop_platform_processes(record.processes, grace)
    forget_handle(home, up_pid)
    remove_platform_file(home)
    for line in report.lines():
        say(line)
    return report


def main(argv: Sequence[str]) -> int:
    """Wait for `up` (argv: UP_PID HOME GRACE) to close the pipe on stdin, then reap after it."""
    up_pid, home, grace = int(argv[0]), Path(argv[1]), float(argv[2])
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):
        pass  # `up` never writes: end of file is `up` gone

    def say(line: str) -> None:
        print(f"reaper of up (pid {up_pid}): {line}", flush=True)

    if reap(up_pid, home, grace, say) is None:
        return 0
    say(f"stopped what `up` left for {home}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
