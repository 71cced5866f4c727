import re
import sys
import time
from pathlib import Path

import psutil

from retrain_assets.runtime.supervisor import ChildFailed, ChildSpec, RestartPolicy, Supervisor
from retrain_assets_tests.support.processes import running
from retrain_assets_tests.support.waiting import patience, wait_for_line, wait_until


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def wait_for_printed(path: Path, line: str) -> None:
    """Wait for a whole line the child printed (the log's header line quotes its code)."""
    wait_for_line(rf"^{re.escape(line)}$", path, interval=0.05)


def test_a_crashed_child_is_restarted_with_backoff_and_reported_by_name(tmp_path):
    supervisor = Supervisor(tmp_path, RestartPolicy(first_delay=0.2, max_crashes=5))
    said: list[str] = []
    steady = supervisor.start(ChildSpec("steady", python("import time; time.sleep(60)")), {})
    flaky = supervisor.start(
        ChildSpec("flaky", python("print('cannot bind', flush=True); raise SystemExit(3)")), {}
    )
    first_pid = flaky.process.pid
    flaky.process.wait(timeout=patience(10))

    supervisor.keep_running(said.append)
    assert flaky.restart_at is not None
    assert "flaky exited unexpectedly with code 3 (crash 1 of at most 4" in said[0]
    assert "restarting it in 0.2 s" in said[0]
    assert "cannot bind" in said[0]
    wait_until(
        lambda: supervisor.keep_running(said.append) or flaky.process.pid != first_pid,
        10,
        "the restart of flaky",
        interval=0.05,
    )
    assert any(line.startswith("restarted flaky (pid ") for line in said)
    assert steady.process.poll() is None and steady.restart_at is None  # untouched
    log = flaky.log.read_text()
    assert "restart after crash 1" in log and "restarting it in" in log
    assert supervisor.stop_all(grace=5, hurry=lambda: False) == []


def test_a_child_that_keeps_crashing_ends_up_after_the_window_budget(tmp_path):
    policy = RestartPolicy(first_delay=0.01, max_delay=0.01, max_crashes=3, window=60)
    supervisor = Supervisor(tmp_path, policy)
    supervisor.start(ChildSpec("broken", python("raise SystemExit(7)")), {})
    said: list[str] = []

    def gives_up() -> bool:
        try:
            supervisor.keep_running(said.append)
        except ChildFailed as failed:
            assert "broken exited unexpectedly with code 7: 3 crashes within 60 s" in str(failed)
            return True
        return False

    wait_until(gives_up, 20, "up giving up on a child that keeps crashing", interval=0.05)
    assert sum("restarted broken" in line for line in said) == 2
    assert supervisor.stop_all(grace=5, hurry=lambda: False) == []


def test_backoff_doubles_up_to_its_cap():
    policy = RestartPolicy(first_delay=1, max_delay=30)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5, 6, 7)] == [1, 2, 4, 8, 16, 30, 30]


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
    wait_for_printed(parent.log, "spawned")
    wait_for_printed(stubborn.log, "ignoring")
    grandchildren = psutil.Process(parent.process.pid).children()
    assert len(grandchildren) == 1

    started = time.monotonic()
    assert supervisor.stop_all(grace=1, hurry=lambda: False) == ["stubborn"]
    assert time.monotonic() - started < 5
    assert running(grandchildren) == []


def _last_line(path: Path) -> str:
    lines = path.read_text().strip().splitlines()
    return lines[-1] if lines else ""


def _http_server(port: int | str) -> str:
    """Code of a child that answers 200 on `port` (0: a port the system picks, printed)."""
    return (
        "import http.server, socketserver\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'OK')\n"
        "    def log_message(self, *args): pass\n"
        f"server = socketserver.TCPServer(('127.0.0.1', {port}), H)\n"
        "print(server.server_address[1], flush=True)\n"
        "server.serve_forever()\n"
    )


def test_a_ready_url_answered_by_another_process_is_not_the_child_ready(tmp_path):
    """Two platforms picked one port: the child fails to bind, the other server answers 200."""
    supervisor = Supervisor(tmp_path, RestartPolicy())
    squatter = supervisor.start(ChildSpec("squatter", python(_http_server(0))), {})
    wait_until(lambda: _last_line(squatter.log).isdigit(), 10, "its port")
    port = int(_last_line(squatter.log))
    url = f"http://127.0.0.1:{port}/health"
    assert supervisor.wait_ready(squatter, timeout=patience(10), give_up=lambda: False)

    slow = supervisor.start(
        ChildSpec("mlflow", python("import time; time.sleep(60)"), ready_url=url), {}
    )
    try:
        supervisor.wait_ready(slow, timeout=2, give_up=lambda: False)
    except ChildFailed as failed:
        assert f"another process answers {url} (port {port} is not mlflow's)" in str(failed)
    else:
        raise AssertionError("a port answered by another process counted as mlflow ready")
    assert supervisor.stop_all(grace=5, hurry=lambda: False) == []


def _unix_server(path: Path, delay: float) -> str:
    """Code of a child that binds a Unix socket after `delay` seconds (a code server loading)."""
    return (
        "import socket, time\n"
        f"time.sleep({delay})\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.bind({str(path)!r}); s.listen(); print('bound', flush=True)\n"
        "time.sleep(60)\n"
    )


def test_a_unix_socket_ready_url_waits_until_the_child_binds_it(tmp_path):
    """The code server binds its socket only once its code has loaded: that is its ready."""
    supervisor = Supervisor(tmp_path / "logs", RestartPolicy())
    path = tmp_path / "code.sock"
    child = supervisor.start(
        ChildSpec("code-server", python(_unix_server(path, 1.0)), ready_url=f"unix:{path}"), {}
    )
    assert supervisor.wait_ready(child, timeout=patience(30), give_up=lambda: False)
    assert _last_line(child.log) == "bound"  # not before it bound

    quitter = supervisor.start(
        ChildSpec("quitter", python("raise SystemExit(3)"), ready_url=f"unix:{tmp_path}/no"), {}
    )
    try:
        supervisor.wait_ready(quitter, timeout=patience(30), give_up=lambda: False)
    except ChildFailed as failed:
        assert "quitter" in str(failed) and "3" in str(failed)
    else:
        raise AssertionError("a child that exited counted as ready")
    supervisor.stop_all(grace=5, hurry=lambda: False)
