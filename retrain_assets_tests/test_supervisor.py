import sys
import time
from pathlib import Path

import psutil
import pytest

from retrain_assets.runtime.supervisor import ChildFailed, ChildSpec, Supervisor
from retrain_assets_tests.running_platform import running
from retrain_assets_tests.waiting import wait_until


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def wait_for_line(path: Path, line: str, seconds: float = 10) -> None:
    """Wait for a line the child printed (the log's header line quotes its code, so whole lines)."""
    wait_until(lambda: line in path.read_text().splitlines(), seconds, f"{line!r} in {path}",
               interval=0.05)


def test_a_child_that_exits_is_reported_by_name_with_its_output(tmp_path):
    supervisor = Supervisor(tmp_path)
    supervisor.start(ChildSpec("steady", python("import time; time.sleep(60)")), {})
    quitter = supervisor.start(
        ChildSpec("quitter", python("print('cannot bind'); raise SystemExit(3)")), {}
    )
    quitter.process.wait(timeout=10)
    with pytest.raises(ChildFailed, match=r"quitter exited unexpectedly with code 3") as failed:
        supervisor.check()
    assert "cannot bind" in str(failed.value)
    assert supervisor.stop_all(grace=5, hurry=lambda: False) == []
    assert all(child.process.poll() is not None for child in supervisor.children)


def test_stop_reaches_grandchildren_and_kills_what_ignores_sigterm(tmp_path):
    supervisor = Supervisor(tmp_path)
    parent = supervisor.start(
        ChildSpec(
            "parent",
            python(
                "import subprocess, sys, time\n"
                "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                "print('spawned', flush=True)\n"
                "time.sleep(60)\n"
            ),
        ),
        {},
    )
    stubborn = supervisor.start(
        ChildSpec(
            "stubborn",
            python(
                "import signal, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('ignoring', flush=True)\n"
                "time.sleep(60)\n"
            ),
        ),
        {},
    )
    wait_for_line(parent.log, "spawned")
    wait_for_line(stubborn.log, "ignoring")
    grandchildren = psutil.Process(parent.process.pid).children()
    assert len(grandchildren) == 1

    started = time.monotonic()
    assert supervisor.stop_all(grace=1, hurry=lambda: False) == ["stubborn"]
    assert time.monotonic() - started < 5
    assert running(grandchildren) == []
