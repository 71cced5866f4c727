"""Real processes for tests: free ports, servers started until they answer, clean stops.

The GPU service and the prediction service are started the same way: in a process of their
own with the default stop signals, output to a log, ready once a health URL answers 200; and
stopped the way `up` stops them, with SIGTERM. Servers with children of their own (a
webserver's code server, gunicorn workers, dagster-daemon's code server) get a process group,
and the whole group is stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import psutil  # pgserver depends on it
import pytest
import requests

from retrain_assets.runtime.default_signals import with_default_signals
from retrain_assets.runtime.environment import repo_file
from retrain_assets_tests.support.waiting import patience

STARTUP_SECONDS = patience(60)
STOP_SECONDS = patience(30)
# a server with a code location to load (dagster-webserver) or a database to migrate (mlflow)
SERVER_STARTUP_SECONDS = patience(120)
DAEMON = str(Path(sys.executable).parent / "dagster-daemon")


# Ports handed out by `free_port`, per pytest-xdist worker: below Linux's ephemeral range
# (32768-60999, where bind(0) and outgoing connections take theirs) and disjoint between workers.
PORTS_PER_WORKER = 2000
FIRST_WORKER_PORT = 20000
_handed_out: set[int] = set()


def _worker_index() -> int:
    """Return this pytest-xdist worker's number (gw0 -> 0), 0 outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0


def free_port() -> int:
    """Return a TCP port on loopback that nothing listens on and no other test was given.

    Not bind(0)-and-close: the suite's workers start platforms at the same moment, and two of
    them were handed one port (the system's pick is free again once the probe closes), so one
    platform's MLflow answered with another's Dagster webserver. Each worker takes its ports
    from a range of its own and never hands one out twice.
    """
    first = FIRST_WORKER_PORT + _worker_index() * PORTS_PER_WORKER
    start = first + (os.getpid() % PORTS_PER_WORKER)  # two pytest runs side by side differ
    for offset in range(PORTS_PER_WORKER):
        port = first + (start - first + offset) % PORTS_PER_WORKER
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port left in {first}..{first + PORTS_PER_WORKER - 1}")


def running(processes: list[psutil.Process]) -> list[int]:
    """Return the pids still running (an exited orphan may be a zombie until init reaps it)."""
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process.pid)
        except psutil.NoSuchProcess:
            continue
    return alive


def start_until_healthy(
    command: Sequence[str],
    env: Mapping[str, str],
    log_path: Path,
    health_url: str,
    log: Callable[[], str],
) -> subprocess.Popen[bytes]:
    """Start `command`, wait until `health_url` answers 200; fail with `log()` if it never does."""
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            with_default_signals(list(command)),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{command[0]} exited {process.returncode}:\n{log()}")
        with contextlib.suppress(requests.ConnectionError):
            if requests.get(health_url, timeout=2).status_code == 200:
                return process
        time.sleep(0.1)
    process.kill()
    process.wait()
    pytest.fail(f"{health_url} did not answer 200 in {STARTUP_SECONDS:.0f} s:\n{log()}")


def stop_with_sigterm(process: subprocess.Popen[bytes] | None, log: Callable[[], str]) -> int:
    """SIGTERM the process (as `up` would) and return its exit code; fail if it ignores it."""
    if process is None or process.poll() is not None:
        return process.returncode if process else 0
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"the service ignored SIGTERM for {STOP_SECONDS:.0f} s:\n{log()}")


def stop_group(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Send `sig` to the process's group, give it STOP_SECONDS, then SIGKILL what is left.

    For processes started with `start_new_session=True`: their children share the group, so
    nothing outlives this call.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_SECONDS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def serving_process(
    argv: list[str], env: dict[str, str], log: Path, answers: Callable[[], bool], what: str
) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server in its own process group, wait until `answers()`, stop the group after.

    Its children (a webserver's code server, gunicorn workers) share the group, so nothing
    outlives the block.
    """
    with log.open("wb") as out:
        process = subprocess.Popen(
            with_default_signals(argv),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + SERVER_STARTUP_SECONDS
        while True:
            assert process.poll() is None, f"{what} exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"{what} never answered:\n{log.read_text()}"
            with contextlib.suppress(requests.RequestException):
                if answers():
                    break
            time.sleep(0.2)
        yield process
    finally:
        stop_group(process)


def start_daemon(log: Path) -> subprocess.Popen[bytes]:
    """Start dagster-daemon on the repository's workspace, in its own process group.

    It gets this process's environment (DAGSTER_HOME, database URLs a test has set); stop it
    with `stop_group`.
    """
    with log.open("ab") as out:
        return subprocess.Popen(
            with_default_signals([DAEMON, "run", "-w", str(repo_file("workspace.yaml"))]),
            env=dict(os.environ),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
