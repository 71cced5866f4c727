"""Starting and stopping one of the project's HTTP services as a real process, for tests.

The GPU service and the prediction service are started the same way: in a process of their
own with the default stop signals, output to a log, ready once a health URL answers 200; and
stopped the way `up` stops them, with SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
import requests

from retrain_assets.runtime.default_signals import with_default_signals
from retrain_assets_tests.waiting import patience

STARTUP_SECONDS = patience(60)
STOP_SECONDS = patience(30)


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
