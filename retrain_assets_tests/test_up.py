"""`retrain-assets up` end to end: embedded Postgres, dagster-webserver, dagster-daemon."""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import psycopg2
import pytest
import requests

from retrain_assets.runtime.ports import port_problem
from retrain_assets.store.server import libpq_url, with_database

pytestmark = pytest.mark.system

UP = [str(Path(sys.executable).parent / "retrain-assets"), "up"]
STARTUP_SECONDS = 120
STOP_SECONDS = 30


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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def up_environment(home: Path, port: int) -> dict[str, str]:
    """Our environment minus anything that would point `up` at another platform."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("RETRAIN_") and key != "DAGSTER_HOME"
    }
    env.update(RETRAIN_HOME=str(home), RETRAIN_WEBSERVER_PORT=str(port))
    return env


def graphql(port: int, query: str) -> dict:
    response = requests.post(f"http://127.0.0.1:{port}/graphql", json={"query": query}, timeout=10)
    response.raise_for_status()
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


def wait_for_graphql(up: subprocess.Popen, port: int, output: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        assert up.poll() is None, f"up exited with {up.returncode}:\n{output.read_text()}"
        with contextlib.suppress(requests.RequestException):
            if graphql(port, "{ version }")["version"]:
                return
        time.sleep(0.5)
    pytest.fail(f"GraphQL never answered on port {port}:\n{output.read_text()}")


def wait_for_line(pattern: str, output: Path, seconds: float = 10) -> re.Match:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        match = re.search(pattern, output.read_text(), re.MULTILINE)
        if match:
            return match
        time.sleep(0.2)
    pytest.fail(f"no line matching {pattern!r} in:\n{output.read_text()}")


def dagster_tables(server_url: str) -> set[str]:
    conn = psycopg2.connect(libpq_url(with_database(server_url, "retrain_dagster")))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            return {row[0] for row in cur.fetchall()}
    finally:
        conn.close()


def test_up_serves_dagster_on_postgres_and_stops_cleanly_on_sigterm(tmp_path):
    home, port, output = tmp_path / "home", free_port(), tmp_path / "up.out"
    with output.open("wb") as out:
        up = subprocess.Popen(
            UP, env=up_environment(home, port), stdout=out, stderr=subprocess.STDOUT
        )
    children: list[psutil.Process] = []
    try:
        wait_for_graphql(up, port, output)
        wait_for_line(r"^ready$", output)
        children = psutil.Process(up.pid).children(recursive=True)
        names = " ".join(" ".join(child.cmdline()) for child in children)
        assert "dagster-webserver" in names and "dagster-daemon" in names

        info = graphql(port, "{ instance { info } }")["instance"]["info"]
        assert "PostgresRunStorage" in info and "PostgresEventLogStorage" in info
        server_url = wait_for_line(r"^\s+Postgres\s+(\S+)$", output).group(1)
        assert "host=" in server_url  # the embedded server, on its Unix socket
        assert {"runs", "event_logs", "instance_info"} <= dagster_tables(server_url)
        assert sorted(p.name for p in (home / "landing").iterdir()) == [
            "lindenhof-de",
            "northwind-us",
            "sakura-jp",
        ]

        second = subprocess.run(
            UP, env=up_environment(home, free_port()), capture_output=True, text=True, timeout=30
        )
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"another `retrain-assets up` (pid {up.pid})" in second.stderr

        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=STOP_SECONDS) == 0, output.read_text()
        assert running(children) == []
        assert port_problem("127.0.0.1", port) is None
        assert not (home / "pg" / "postmaster.pid").exists()  # embedded Postgres stopped
    finally:  # after a failure: let `up` stop its children, then kill whatever is left
        if up.poll() is None:
            children += psutil.Process(up.pid).children(recursive=True)
            up.terminate()
            try:
                up.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait()
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()


def test_up_refuses_a_taken_port_before_starting_anything(tmp_path):
    home = tmp_path / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run(
            UP,
            env=up_environment(home, port),
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"port {port} on 127.0.0.1 is in use" in result.stderr
    assert "RETRAIN_WEBSERVER_PORT" in result.stderr
    assert time.monotonic() - started < 15
    assert not home.exists()  # no Postgres, no DAGSTER_HOME, no logs
