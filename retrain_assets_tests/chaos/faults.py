"""Killing one process of a running platform by pid and waiting until `up` brought it back.

The `up` supervisor restarts a crashed child with backoff; a test finds the child among the
direct children of the `up` process by its command line, SIGKILLs it (the supervisor then
kills what is left of its process group), and waits for the restart line and for the new
process to answer. Postgres is the test's own server (`RETRAIN_PG_URL`), killed the way a
crash does (`pg_ctl stop -m immediate`: no checkpoint, recovery at the next start) and started
again on the same data folder; never the embedded server of another test or the system's.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil
import requests

from retrain_assets_tests.gpu.restartable_postgres import RestartablePostgres
from retrain_assets_tests.support.platform import RunningPlatform
from retrain_assets_tests.support.waiting import wait_until

# a child of `up` by the name the supervisor gives it -> how its command line is recognised
# (console scripts run as `python <script> ...`: the script is argv[0] or argv[1])
COMMAND_LINES: dict[str, Callable[[list[str]], bool]] = {
    "dagster-daemon": lambda argv: any(a.endswith("dagster-daemon") for a in argv[:2]),
    "code-server": lambda argv: "code-server" in argv[1:3],
    "gpu-service": lambda argv: "gpu-service" in argv[1:3],
    "mlflow": lambda argv: any(a.endswith("mlflow") for a in argv[:2]) and "server" in argv[1:3],
}


@dataclass(frozen=True)
class Recovery:
    """One fault: what was killed, its pid before and after, seconds until it answered again."""

    process: str
    old_pid: int
    new_pid: int
    seconds_to_restart: float


def child_pid(platform: RunningPlatform, name: str) -> int:
    """Return the pid of `up`'s child `name` (a direct child: it leads its own session)."""
    matches = COMMAND_LINES[name]
    for child in psutil.Process(platform.process.pid).children():
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.status() != psutil.STATUS_ZOMBIE and matches(child.cmdline()):
                return child.pid
    raise LookupError(f"no running {name} among the children of up (pid {platform.process.pid})")


def _answers(url: str) -> bool:
    with contextlib.suppress(requests.RequestException):
        return requests.get(url, timeout=5).status_code < 500
    return False


def kill_child(platform: RunningPlatform, name: str, ready_url: str | None = None) -> Recovery:
    """SIGKILL `up`'s child `name`; wait until `up` restarted it (and `ready_url` answers)."""
    old = child_pid(platform, name)
    offset = len(platform.output.read_text())
    killed_at = time.monotonic()
    os.kill(old, signal.SIGKILL)
    restarted = re.compile(rf"restarted {re.escape(name)} \(pid (\d+)\)")
    found: list[int] = []

    def restarted_by_up() -> bool:
        match = restarted.search(platform.output.read_text()[offset:])
        if match:
            found.append(int(match.group(1)))
        return bool(match)

    wait_until(
        restarted_by_up,
        60,
        f"up restarting {name} after its pid {old} was killed",
        interval=0.2,
        detail=lambda: platform.output.read_text()[offset:][-3000:],
    )
    if ready_url:
        what = f"the restarted {name} answering"
        wait_until(lambda: _answers(ready_url), 120, what, interval=0.2)
    return Recovery(name, old, found[-1], round(time.monotonic() - killed_at, 1))


def crash_postgres(
    platform: RunningPlatform, postgres: RestartablePostgres, noticed: Callable[[], bool]
) -> Recovery:
    """Kill the platform's Postgres as a crash does; start it again once `noticed()` is true.

    `noticed` is an event showing the outage reached the platform (the GPU service's /healthz
    answering 503), so the server is down long enough to matter and no longer.
    """
    import pgserver

    info = postgres.server.get_postmaster_info()
    old = info.pid if info else -1
    killed_at = time.monotonic()
    pgserver.pg_ctl(
        ["-w", "-m", "immediate", "stop"], pgdata=postgres.pgdata, user=postgres.server.system_user
    )
    try:
        wait_until(noticed, 60, "the platform noticing Postgres is gone", interval=0.2)
    finally:
        postgres.start()
    info = postgres.server.get_postmaster_info()
    seconds = round(time.monotonic() - killed_at, 1)
    return Recovery("postgres", old, info.pid if info else -1, seconds)
