"""`$RETRAIN_HOME/platform.json`: which `up` runs for this home, its processes and its endpoints.

A second terminal has only RETRAIN_HOME; the ports `up` chose (RETRAIN_MLFLOW_PORT, ...) and the
pids of its processes are in `up`'s environment alone. `up` writes them here (owner only,
replaced atomically: a reader never sees half a file) when it starts a process and once it is
ready, and removes the file when it stops cleanly. Each process is recorded with its start time,
so a pid the kernel gave to another program since is recognised and never signalled.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

PLATFORM_FILE = "platform.json"
FORMAT_VERSION = 1
SAME_START_SECONDS = 0.05  # psutil derives both from the same clock ticks: equal when the same


class PlatformFileError(ValueError):
    """The file exists but is not a platform record; the message names it and what is wrong."""


@dataclass(frozen=True)
class RecordedProcess:
    """One process: its name, pid and start time (seconds since the epoch, as psutil says).

    `group`: it leads its own process group, so stopping it stops the whole group (what it
    started, e.g. a code server's runs). `stop_signal` asks it to stop (Postgres: SIGINT, its
    fast shutdown).
    """

    name: str
    pid: int
    started: float
    group: bool = True
    stop_signal: str = "SIGTERM"

    @classmethod
    def of(
        cls, name: str, pid: int, group: bool = True, stop_signal: str = "SIGTERM"
    ) -> RecordedProcess:
        """Record the running process `pid` under `name`.

        Raises:
            psutil.NoSuchProcess: it is not running.
        """
        return cls(name, pid, psutil.Process(pid).create_time(), group, stop_signal)

    def is_running(self) -> bool:
        """Return whether this very process runs: the pid is alive and started when recorded."""
        try:
            process = psutil.Process(self.pid)
            return (
                abs(process.create_time() - self.started) < SAME_START_SECONDS
                and process.status() != psutil.STATUS_ZOMBIE
            )
        except psutil.NoSuchProcess:
            return False


@dataclass(frozen=True)
class PlatformRecord:
    """What one `up` recorded: itself, its reaper, its processes and the endpoints it chose."""

    up: RecordedProcess
    ready: bool
    processes: tuple[RecordedProcess, ...] = ()
    endpoints: Mapping[str, str] = field(default_factory=dict)


def platform_file(home: Path) -> Path:
    """Return where `up` records the platform of `home`."""
    return home / PLATFORM_FILE


def write_platform_file(home: Path, record: PlatformRecord) -> Path:
    """Write `record` to `home`'s file, readable by its owner only, replacing it atomically."""
    path = platform_file(home)
    temporary = path.with_name(f".{PLATFORM_FILE}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    body = {
        "version": FORMAT_VERSION,
        "up": asdict(record.up),
        "ready": record.ready,
        "processes": [asdict(p) for p in record.processes],
        "endpoints": dict(record.endpoints),
    }
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(body, handle, indent=2)
        handle.write("\n")
    temporary.replace(path)
    return path


def read_platform_file(home: Path) -> PlatformRecord | None:
    """Return the record of `home`'s platform, or None when there is no file.

    Raises:
        PlatformFileError: the file is not JSON or misses a field (named, with the file).
    """
    path = platform_file(home)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        body = json.loads(text)
        if body.get("version") != FORMAT_VERSION:
            raise PlatformFileError(f"version {body.get('version')!r}, not {FORMAT_VERSION}")
        return PlatformRecord(
            up=_process(body["up"]),
            ready=bool(body["ready"]),
            processes=tuple(_process(p) for p in body["processes"]),
            endpoints={str(k): str(v) for k, v in body["endpoints"].items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        what = f"missing field {err}" if isinstance(err, KeyError) else str(err)
        raise PlatformFileError(
            f"{path} is not a platform record ({what}); remove it if no `up` runs for {home}"
        ) from None


def _process(body: Mapping[str, object]) -> RecordedProcess:
    return RecordedProcess(
        name=str(body["name"]),
        pid=int(body["pid"]),  # type: ignore[call-overload]
        started=float(body["started"]),  # type: ignore[arg-type]
        group=bool(body.get("group", True)),
        stop_signal=str(body.get("stop_signal", "SIGTERM")),
    )


def remove_platform_file(home: Path) -> None:
    """Remove `home`'s file (a clean stop, or a stale platform that has been stopped)."""
    platform_file(home).unlink(missing_ok=True)
