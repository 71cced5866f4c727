"""A supervisor killed hard leaves nothing behind, and `down` stops only what `up` recorded.

Small dummy processes stand for the platform: a supervisor script (as `up` runs its children),
a child that starts a grandchild in its group, a grandchild that ignores SIGTERM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

from retrain_assets.runtime.down import run_down
from retrain_assets.runtime.platform_file import (
    PlatformRecord,
    RecordedProcess,
    platform_file,
    write_platform_file,
)
from retrain_assets_tests.support.processes import running
from retrain_assets_tests.support.waiting import wait_for_line, wait_until

# a process that starts a grandchild ignoring SIGTERM, writes its pid to argv[1], then sleeps
PARENT_OF_ONE = textwrap.dedent(
    """
    import subprocess, sys, time
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    grandchild = subprocess.Popen([sys.executable, "-c", stubborn])
    with open(sys.argv[1] + ".tmp", "w") as out:
        out.write(str(grandchild.pid))
    import os; os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(600)
    """
)

# `up` in small: a supervisor with one child, and (argv[2] == "reaper") its reaper and record
SUPERVISOR = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from retrain_assets.runtime.platform_record import PlatformRecorder
    from retrain_assets.runtime.reaper import start_reaper
    from retrain_assets.runtime.supervisor import ChildSpec, Supervisor

    home, child_code = Path(sys.argv[1]), sys.argv[3]
    supervisor = Supervisor(home / "logs")
    if sys.argv[2] == "reaper":
        reaper, pipe = start_reaper(home, home / "logs" / "reaper.log", grace=1.0)
    argv = (sys.executable, "-c", child_code, str(home / "grandchild.pid"))
    child = supervisor.start(ChildSpec("parent-of-one", argv), {})
    PlatformRecorder(home).update(supervisor)
    print("child", child.process.pid, flush=True)
    time.sleep(600)
    """
)


def start_supervisor(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[bytes], Path]:
    home, output = tmp_path / "home", tmp_path / "supervisor.out"
    home.mkdir()
    with output.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", SUPERVISOR, str(home), mode, PARENT_OF_ONE],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return process, output


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def test_a_child_gets_sigterm_when_its_supervisor_is_killed(tmp_path):
    supervisor, output = start_supervisor(tmp_path, "no-reaper")
    child_pid = int(wait_for_line(r"^child (\d+)$", output).group(1))
    child = psutil.Process(child_pid)
    grandchild_file = tmp_path / "home" / "grandchild.pid"
    wait_until(grandchild_file.exists, 10, "the child's grandchild")
    grandchild = int(grandchild_file.read_text())
    try:
        supervisor.kill()
        supervisor.wait()
        # the parent-death signal: the child (which never handles SIGTERM) ends at once
        wait_until(lambda: running([child]) == [], 10, "the end of the supervisor's child")
    finally:
        kill_all([child_pid, grandchild])


def test_the_reaper_ends_every_process_group_of_a_killed_supervisor(tmp_path):
    supervisor, output = start_supervisor(tmp_path, "reaper")
    home = tmp_path / "home"
    child_pid = int(wait_for_line(r"^child (\d+)$", output).group(1))
    wait_until((home / "grandchild.pid").exists, 10, "the child's grandchild")
    grandchild_pid = int((home / "grandchild.pid").read_text())
    processes = [psutil.Process(child_pid), psutil.Process(grandchild_pid)]
    assert platform_file(home).exists()
    try:
        supervisor.kill()
        supervisor.wait()
        # the grandchild ignores SIGTERM: the reaper kills it after its 1 s grace
        wait_until(
            lambda: running(processes) == [],
            15,
            "the end of the child and of the grandchild that ignores SIGTERM",
            detail=lambda: (home / "logs" / "reaper.log").read_text(),
        )
        wait_until(lambda: not platform_file(home).exists(), 10, "the reaper removing the record")
        log = (home / "logs" / "reaper.log").read_text()
        killed = f"killed (SIGKILL) after the grace period: parent-of-one (group pid {child_pid})"
        assert killed in log
    finally:
        kill_all([child_pid, grandchild_pid])


def dead_up() -> RecordedProcess:
    gone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    recorded = RecordedProcess.of("up", gone.pid)
    gone.kill()
    gone.wait()
    return recorded


def test_down_stops_the_recorded_groups_of_a_killed_up(tmp_path, capsys):
    leader = subprocess.Popen(
        [sys.executable, "-c", PARENT_OF_ONE, str(tmp_path / "grandchild.pid")],
        start_new_session=True,
    )
    wait_until((tmp_path / "grandchild.pid").exists, 10, "the dummy's grandchild")
    grandchild = psutil.Process(int((tmp_path / "grandchild.pid").read_text()))
    home = tmp_path / "home"
    home.mkdir()
    record = PlatformRecord(
        up=dead_up(),
        ready=True,
        processes=(RecordedProcess.of("dummy", leader.pid),),
    )
    write_platform_file(home, record)
    try:
        assert run_down(home, grace=1.0) == 0
        out = capsys.readouterr().out
        assert f"`up` (pid {record.up.pid}) is not running: stopping what it left" in out
        assert f"killed (SIGKILL) after the grace period: dummy (group pid {leader.pid})" in out
        assert leader.wait(timeout=5) == -signal.SIGTERM  # asked first, it went
        wait_until(lambda: running([grandchild]) == [], 10, "the grandchild's end")
        assert not platform_file(home).exists()
        assert run_down(home) == 0
        assert "nothing to stop" in capsys.readouterr().out
    finally:
        kill_all([leader.pid, grandchild.pid])


def test_down_leaves_alone_a_pid_that_is_another_process_now(tmp_path, capsys):
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    home = tmp_path / "home"
    home.mkdir()
    started = psutil.Process(stranger.pid).create_time()
    # recorded earlier: the same pid, another start time (the kernel reused the number)
    recorded = RecordedProcess("dagster-daemon", stranger.pid, started - 3600)
    write_platform_file(home, PlatformRecord(up=dead_up(), ready=True, processes=(recorded,)))
    try:
        assert run_down(home, grace=1.0) == 1
        out = capsys.readouterr().out
        assert f"left alone: dagster-daemon: pid {stranger.pid} is now another process" in out
        assert stranger.poll() is None  # never signalled
    finally:
        stranger.kill()
        stranger.wait()
