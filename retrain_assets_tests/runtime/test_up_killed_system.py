"""`up` killed with SIGKILL leaves nothing behind, and the next `up` on its home starts.

One real platform (`--no-demo`), twice: the first one's record also shows that a command given
only RETRAIN_HOME finds the ports `up` chose.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from retrain_assets.runtime.platform_file import platform_file, read_platform_file
from retrain_assets.store.server import embedded_postmaster_pid
from retrain_assets_tests.support.platform import STOP_SECONDS, UP, up_environment
from retrain_assets_tests.support.platform_ledger import LEDGER
from retrain_assets_tests.support.processes import free_port, running
from retrain_assets_tests.support.waiting import wait_for_line, wait_until

CLI = str(Path(sys.executable).parent / "retrain-assets")


def start_up(env: dict[str, str], output: Path) -> subprocess.Popen[bytes]:
    with output.open("wb") as out:
        return subprocess.Popen([*UP, "--no-demo"], env=env, stdout=out, stderr=subprocess.STDOUT)


@pytest.mark.system
def test_a_killed_up_leaves_nothing_and_the_next_up_on_its_home_starts(tmp_path):
    home = tmp_path / "home"
    env = up_environment(home, free_port())
    first_out, second_out = tmp_path / "first.out", tmp_path / "second.out"
    entry = LEDGER.started()
    first = start_up(env, first_out)
    leftovers: list[psutil.Process] = []
    second: subprocess.Popen[bytes] | None = None
    try:
        wait_for_line(r"^ready$", first_out, 120)
        entry.ready()
        record = read_platform_file(home)
        assert record is not None and record.up.pid == first.pid and record.ready
        gpu_url = f"http://127.0.0.1:{env['RETRAIN_GPU_PORT']}"
        assert record.endpoints["mlflow_uri"] == f"http://127.0.0.1:{env['RETRAIN_MLFLOW_PORT']}"
        assert record.endpoints["gpu_url"] == gpu_url

        # a second terminal knows only RETRAIN_HOME: status reaches this platform's GPU service
        only_home = {k: v for k, v in env.items() if not k.startswith("RETRAIN_")}
        status = subprocess.run(
            [CLI, "status"],
            env={**only_home, "RETRAIN_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert status.returncode == 0, status.stderr
        assert f"training backend: GPU service reachable at {gpu_url}" in status.stdout

        postgres = embedded_postmaster_pid(home)
        assert postgres is not None
        leftovers = [*psutil.Process(first.pid).children(recursive=True), psutil.Process(postgres)]
        recorded = {p.pid for p in record.processes}
        assert {c.pid for c in psutil.Process(first.pid).children()} - recorded != set()  # reaper
        assert recorded <= {p.pid for p in leftovers}

        first.kill()
        first.wait()
        entry.stopped()
        wait_until(
            lambda: running(leftovers) == [],
            60,
            "the end of every process of the killed `up`",
            detail=lambda: (
                f"still running: {running(leftovers)}\n"
                + (home / "logs" / "reaper.log").read_text()
            ),
        )
        assert not platform_file(home).exists()
        assert not (home / "pg" / "postmaster.pid").exists()

        entry = LEDGER.started()
        second = start_up(env, second_out)
        wait_for_line(r"^ready$", second_out, 120)
        entry.ready()
        assert "in use" not in second_out.read_text()
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=STOP_SECONDS) == 0, second_out.read_text()
        entry.stopped()
        assert not platform_file(home).exists()  # a clean stop removes the record
        assert not (home / "pg" / "postmaster.pid").exists()  # and stops Postgres
    finally:
        for up in (first, second):
            if up is not None and up.poll() is None:
                up.kill()
                up.wait()
        for process in leftovers:
            if process.is_running():
                process.kill()
