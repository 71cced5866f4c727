"""Start the platform's long-running processes, watch them, and stop them as one.

Each child runs in a session of its own, so the terminal's Ctrl-C reaches only `up`, which
then stops every child's whole process group (the code servers and runs they spawn
included): first SIGTERM, then SIGKILL for what is still there after the grace period. Each
child starts with the default action for the stop signals (see `default_signals`), so a `up`
launched with SIGTERM ignored still stops its children cleanly.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil
import requests

from retrain_assets.runtime.default_signals import with_default_signals

POLL_SECONDS = 0.2
_ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class ChildSpec:
    """One long-running process: its name, its command line, and a URL that answers once ready."""

    name: str
    argv: tuple[str, ...]
    ready_url: str | None = None


@dataclass
class Child:
    """A started child, the file its output goes to, and where this start's output begins."""

    spec: ChildSpec
    process: subprocess.Popen[bytes]
    log: Path
    log_offset: int = 0


class ChildFailed(RuntimeError):
    """A child exited on its own or never became ready; the message says which and why."""


def log_tail(child: Child, lines: int = 15) -> str:
    """Return the last lines this start of the child wrote, indented and uncoloured."""
    try:
        with child.log.open("rb") as log:
            log.seek(child.log_offset)
            text = log.read().decode(errors="replace")
    except OSError:
        return "    (no log)"
    text = _ANSI_COLOUR.sub("", text)
    return "\n".join(f"    {line}" for line in text.splitlines()[-lines:]) or "    (no output)"


def _exit_description(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited unexpectedly with code {code}"


class Supervisor:
    """The children of one `up`, started in order and stopped together."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[Child] = []

    def start(self, spec: ChildSpec, env: Mapping[str, str]) -> Child:
        """Start one child in its own session, its output appended to `<log_dir>/<name>.log`."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{spec.name}.log"
        with log.open("ab") as out:
            offset = out.tell()
            out.write(
                f"\n=== {dt.datetime.now():%Y-%m-%d %H:%M:%S} {' '.join(spec.argv)}\n".encode()
            )
            out.flush()
            process = subprocess.Popen(
                with_default_signals(spec.argv),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        child = Child(spec, process, log, offset)
        self.children.append(child)
        return child

    def wait_ready(self, child: Child, timeout: float, give_up: Callable[[], bool]) -> bool:
        """Wait until the child's ready URL answers; return False if `give_up()` turns true.

        Raises:
            ChildFailed: the child exited first, or did not answer within `timeout` seconds.
        """
        url = child.spec.ready_url
        if url is None:
            return True
        deadline = time.monotonic() + timeout
        while not give_up():
            self._raise_if_exited(child)
            try:
                if requests.get(url, timeout=2).status_code < 500:
                    return True
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise ChildFailed(
                    f"{child.spec.name} did not answer {url} within {timeout:.0f} s; "
                    f"last lines of {child.log}:\n{log_tail(child)}"
                )
            time.sleep(POLL_SECONDS * 2)
        return False

    def check(self) -> None:
        """Raise ChildFailed if any child has exited (none of them ever should on its own)."""
        for child in self.children:
            self._raise_if_exited(child)

    def stop_all(self, grace: float, hurry: Callable[[], bool]) -> list[str]:
        """SIGTERM every child's process group, SIGKILL what remains after `grace` seconds.

        Returns:
            The names of the children that had to be killed.
        """
        for child in self.children:
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not hurry():
            if not any(_group_alive(child) for child in self.children):
                break
            time.sleep(POLL_SECONDS)
        killed = [child for child in self.children if _group_alive(child)]
        for child in killed:
            _signal_group(child, signal.SIGKILL)
        for child in self.children:
            child.process.wait()
        return [child.spec.name for child in killed]

    @staticmethod
    def _raise_if_exited(child: Child) -> None:
        code = child.process.poll()
        if code is not None:
            raise ChildFailed(
                f"{child.spec.name} {_exit_description(code)}; "
                f"last lines of {child.log}:\n{log_tail(child)}"
            )


def _signal_group(child: Child, sig: signal.Signals) -> None:
    """Signal the child's process group (its pid: it leads its own session)."""
    with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
        os.killpg(child.process.pid, sig)


def _group_alive(child: Child) -> bool:
    """Return whether a process of the child's group is still running (zombies do not count).

    An orphan that exited waits as a zombie until init reaps it, which some inits do lazily;
    it holds no port and no connection, so it must not keep `up` waiting for the grace period.
    """
    child.process.poll()  # reap the leader ourselves
    try:
        os.killpg(child.process.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return any(_runs_in_group(process, child.process.pid) for process in psutil.process_iter())


def _runs_in_group(process: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, ProcessLookupError):
        return False  # it exited while we looked
