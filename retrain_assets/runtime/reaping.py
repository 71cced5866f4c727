"""Stop recorded processes, and each one's whole process group, without touching a stranger.

Used by `retrain-assets down`, by `up`'s reaper when `up` dies, and by the next `up` on a home
whose last `up` was killed. Each of `up`'s children leads its own process group; what it
started (a code server's runs, MLflow's workers) is in that group. A recorded pid is signalled
only when it is the very process recorded (same start time). A group whose leader has exited
but whose members still run is still ours: Linux does not hand out a number again while a
process group uses it as its id.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil

from retrain_assets.runtime.platform_file import RecordedProcess

POLL_SECONDS = 0.1
KILLED_SECONDS = 5.0  # a SIGKILLed process is gone in a moment; ports free once it is


@dataclass
class StopReport:
    """What a stop did: stopped on request, killed after the grace, gone already, left alone."""

    stopped: list[str] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def extend(self, other: StopReport) -> None:
        """Add what another stop did to this report."""
        self.stopped += other.stopped
        self.killed += other.killed
        self.gone += other.gone
        self.refused += other.refused

    def lines(self) -> list[str]:
        """Return one line per kind of outcome that happened."""
        said = [
            ("stopped", self.stopped),
            ("killed (SIGKILL) after the grace period", self.killed),
            ("already gone", self.gone),
            ("left alone", self.refused),
        ]
        return [f"{what}: {', '.join(names)}" for what, names in said if names]


def group_members(pgid: int) -> list[psutil.Process]:
    """Return the live (not zombie) processes of process group `pgid`."""
    members = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
    return members


def alive(recorded: RecordedProcess) -> bool:
    """Return whether the recorded process (any process of its group, for a leader) runs."""
    if recorded.group:
        return bool(group_members(recorded.pid))
    return recorded.is_running()


def _signal(recorded: RecordedProcess, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # it went meanwhile
        if recorded.group:
            os.killpg(recorded.pid, sig)
        else:
            os.kill(recorded.pid, sig)


def label(recorded: RecordedProcess) -> str:
    """Return how reports name a recorded process: `name (group pid N)`."""
    kind = "group " if recorded.group else ""
    return f"{recorded.name} ({kind}pid {recorded.pid})"


def _ours(recorded: RecordedProcess) -> str | None:
    """Return why `recorded` must be left alone, or None when signalling it is safe."""
    if recorded.is_running():
        return None
    try:
        now = psutil.Process(recorded.pid)
        started = now.create_time()
        command = " ".join(now.cmdline())[:80] or now.name()
    except psutil.NoSuchProcess:
        return None  # the leader has exited: any members left are of our group
    except psutil.AccessDenied:
        return f"pid {recorded.pid} is now a process this user may not inspect"
    return (
        f"pid {recorded.pid} is now another process ({command!r}, started {started:.2f}, "
        f"recorded {recorded.started:.2f})"
    )


def stop_platform_processes(processes: Iterable[RecordedProcess], grace: float) -> StopReport:
    """Stop the recorded groups (last started first), then the servers they used (Postgres)."""
    recorded = list(processes)
    report = stop_recorded(reversed([p for p in recorded if p.group]), grace)
    report.extend(stop_recorded([p for p in recorded if not p.group], grace))
    return report


def stop_recorded(processes: Iterable[RecordedProcess], grace: float) -> StopReport:
    """Ask each recorded process (its group) to stop; SIGKILL what remains after `grace` s.

    A pid that is now another process is never signalled; it is reported as left alone.
    """
    report = StopReport()
    asked: list[RecordedProcess] = []
    for recorded in processes:
        why_not = _ours(recorded)
        if why_not is not None:
            report.refused.append(f"{recorded.name}: {why_not}")
        elif not alive(recorded):
            report.gone.append(label(recorded))
        else:
            _signal(recorded, signal.Signals[recorded.stop_signal])
            asked.append(recorded)
    deadline = time.monotonic() + grace
    while asked and time.monotonic() < deadline and any(alive(r) for r in asked):
        time.sleep(POLL_SECONDS)
    for recorded in asked:
        if alive(recorded):
            _signal(recorded, signal.SIGKILL)
            report.killed.append(label(recorded))
        else:
            report.stopped.append(label(recorded))
    _wait_gone(asked, KILLED_SECONDS)
    return report


def _wait_gone(processes: list[RecordedProcess], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(r) for r in processes):
        time.sleep(POLL_SECONDS)
