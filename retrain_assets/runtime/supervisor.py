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
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import requests

from retrain_assets.runtime.default_signals import with_default_signals

POLL_SECONDS = 0.2
UNIX_SCHEME = "unix:"
_ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class ChildSpec:
    """One long-running process: its name, its command line, and a URL that answers once ready.

    `ready_url` is an HTTP URL, or `unix:<path>` for a server that binds a Unix socket only once
    it is ready (the code server). `after_ready` names the children that must be ready before
    this one starts (the webserver and the daemon load the code server's workspace at start).
    """

    name: str
    argv: tuple[str, ...]
    ready_url: str | None = None
    after_ready: tuple[str, ...] = ()


@dataclass
class Child:
    """A started child, the file its output goes to, and where this start's output begins.

    `env` is kept so a crashed child restarts exactly as it first started; `crashes` holds the
    monotonic times of its recent crashes and `restart_at` when the next start is due.
    """

    spec: ChildSpec
    process: subprocess.Popen[bytes]
    log: Path
    log_offset: int = 0
    env: Mapping[str, str] = field(default_factory=dict)
    crashes: list[float] = field(default_factory=list)
    restart_at: float | None = None


@dataclass(frozen=True)
class RestartPolicy:
    """How a crashed child comes back: exponential backoff, and when to give up.

    The n-th crash inside `window` seconds waits `first_delay * 2**(n-1)` (at most `max_delay`)
    before the restart; crash number `max_crashes` inside the window gives up.
    """

    first_delay: float = 1.0
    max_delay: float = 30.0
    max_crashes: int = 5
    window: float = 300.0

    def delay(self, recent_crashes: int) -> float:
        """Return the wait before restarting after the `recent_crashes`-th recent crash."""
        return min(self.max_delay, self.first_delay * 2 ** max(recent_crashes - 1, 0))


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
    """The children of one `up`, started in order, restarted when they crash, stopped together."""

    def __init__(self, log_dir: Path, restarts: RestartPolicy | None = None) -> None:
        self.log_dir = log_dir
        self.restarts = restarts or RestartPolicy()
        self.children: list[Child] = []

    def start(self, spec: ChildSpec, env: Mapping[str, str]) -> Child:
        """Start one child in its own session, its output appended to `<log_dir>/<name>.log`."""
        child = Child(spec, *self._spawn(spec, env), env=dict(env))
        self.children.append(child)
        return child

    def _spawn(
        self, spec: ChildSpec, env: Mapping[str, str], note: str = ""
    ) -> tuple[subprocess.Popen[bytes], Path, int]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{spec.name}.log"
        with log.open("ab") as out:
            offset = out.tell()
            header = f"{dt.datetime.now():%Y-%m-%d %H:%M:%S} {note}{' '.join(spec.argv)}"
            out.write(f"\n=== {header}\n".encode())
            out.flush()
            process = subprocess.Popen(
                with_default_signals(spec.argv, die_with_parent=True),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return process, log, offset

    def keep_running(self, say: Callable[[str], None], now: float | None = None) -> None:
        """Restart crashed children with backoff; give up on one that crashes too often.

        Called by `up`'s watch loop. A child that exited is noted as a crash (its group is
        killed, so a code server it left cannot hold a port) and restarted once its backoff
        has passed; each step is reported through `say` and in the child's log.

        Raises:
            ChildFailed: a child crashed `max_crashes` times within the policy's window.
        """
        now = time.monotonic() if now is None else now
        for child in self.children:
            if child.restart_at is None:
                code = child.process.poll()
                if code is not None:
                    self._note_crash(child, code, now, say)
            elif now >= child.restart_at:
                crash = len(child.crashes)
                child.process, child.log, child.log_offset = self._spawn(
                    child.spec, child.env, note=f"restart after crash {crash}: "
                )
                child.restart_at = None
                say(f"restarted {child.spec.name} (pid {child.process.pid})")

    def _note_crash(self, child: Child, code: int, now: float, say: Callable[[str], None]) -> None:
        policy = self.restarts
        child.crashes = [t for t in child.crashes if now - t < policy.window] + [now]
        what = f"{child.spec.name} {_exit_description(code)}"
        if len(child.crashes) >= policy.max_crashes:
            raise ChildFailed(
                f"{what}: {len(child.crashes)} crashes within {policy.window:.0f} s, giving up; "
                f"last lines of {child.log}:\n{log_tail(child)}"
            )
        _signal_group(child, signal.SIGKILL)  # what it left behind (a code server, workers)
        delay = policy.delay(len(child.crashes))
        child.restart_at = now + delay
        message = (
            f"{what} (crash {len(child.crashes)} of at most {policy.max_crashes - 1} within "
            f"{policy.window:.0f} s); restarting it in {delay:g} s"
        )
        tail = log_tail(child)
        with child.log.open("ab") as out:
            out.write(f"=== {message}\n".encode())
        say(f"{message}; last lines of {child.log}:\n{tail}")

    def wait_ready(self, child: Child, timeout: float, give_up: Callable[[], bool]) -> bool:
        """Wait until the child's ready URL answers; return False if `give_up()` turns true.

        Raises:
            ChildFailed: the child exited first, or did not answer within `timeout` seconds.
        """
        url = child.spec.ready_url
        if url is None:
            return True
        if url.startswith(UNIX_SCHEME):
            return self._wait_socket(child, Path(url[len(UNIX_SCHEME) :]), timeout, give_up)
        port = urlsplit(url).port
        deadline = time.monotonic() + timeout
        answered_by_another = False
        while not give_up():
            self._raise_if_exited(child)
            try:
                if requests.get(url, timeout=2).status_code < 500:
                    if port is None or group_listens_on(child.process.pid, port):
                        return True
                    answered_by_another = True
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                why = (
                    f"another process answers {url} (port {port} is not {child.spec.name}'s)"
                    if answered_by_another
                    else f"{child.spec.name} did not answer {url}"
                )
                raise ChildFailed(
                    f"{why} within {timeout:.0f} s; last lines of {child.log}:\n{log_tail(child)}"
                )
            time.sleep(POLL_SECONDS * 2)
        return False

    def _wait_socket(
        self, child: Child, path: Path, timeout: float, give_up: Callable[[], bool]
    ) -> bool:
        """Wait until the child's Unix socket accepts a connection (see `wait_ready`)."""
        deadline = time.monotonic() + timeout
        while not give_up():
            self._raise_if_exited(child)
            if socket_accepts(path):
                return True
            if time.monotonic() > deadline:
                raise ChildFailed(
                    f"{child.spec.name} did not listen on {path} within {timeout:.0f} s; "
                    f"last lines of {child.log}:\n{log_tail(child)}"
                )
            time.sleep(POLL_SECONDS * 2)
        return False

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


def socket_accepts(path: Path) -> bool:
    """Return whether a Unix socket at `path` accepts a connection now."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def group_listens_on(pid: int, port: int) -> bool:
    """Return whether `pid` or one of its descendants listens on TCP `port`.

    A ready URL answering 200 is not enough: when the port was taken between `up`'s port check
    and the child's bind (another program, or a second platform started at the same moment),
    the child exits with a bind error while the other program answers its health URL, and
    `up` would report ready a server that is not there. Processes psutil may not read count as
    listening: the check only refuses what it can see.
    """
    try:
        leader = psutil.Process(pid)
        processes = [leader, *leader.children(recursive=True)]
    except psutil.NoSuchProcess:
        return False
    for process in processes:
        try:
            connections = process.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        except psutil.AccessDenied:
            return True
        if any(
            c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in connections
        ):
            return True
    return False


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
