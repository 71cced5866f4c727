"""Start the real platform (`retrain-assets up`) for a test and talk to it as the UI does."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil  # pgserver depends on it
import psycopg2
import pytest
import requests

from retrain_assets.models.freshness_report import REPORTER_TAG
from retrain_assets.runtime.environment import repo_file
from retrain_assets.store.server import libpq_url, with_database
from retrain_assets_tests.support.platform_ledger import LEDGER, PlatformEntry
from retrain_assets_tests.support.processes import free_port, serving_process
from retrain_assets_tests.support.waiting import patience, wait_for_line

UP = [str(Path(sys.executable).parent / "retrain-assets"), "up"]
STARTUP_SECONDS = patience(120)
STOP_SECONDS = patience(30)


def up_environment(
    home: Path,
    port: int,
    gpu_port: int | None = None,
    mlflow_port: int | None = None,
    serve_port: int | None = None,
) -> dict[str, str]:
    """Our environment minus anything that would point `up` at another platform.

    The GPU service, MLflow and the prediction service get free ports too (unless given),
    never a real :8765, :5000 or :8080. The demo clock is off (RETRAIN_DEMO_DAY_SECONDS=0)
    unless a test turns it on.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("RETRAIN_", "MLFLOW_")) and key != "DAGSTER_HOME"
    }
    env.update(
        # the demo's clock would land days under tests that count them; a test of the live
        # demo turns it on
        RETRAIN_DEMO_DAY_SECONDS="0",
        RETRAIN_HOME=str(home),
        RETRAIN_WEBSERVER_PORT=str(port),
        RETRAIN_GPU_PORT=str(gpu_port if gpu_port is not None else free_port()),
        RETRAIN_MLFLOW_PORT=str(mlflow_port if mlflow_port is not None else free_port()),
        RETRAIN_SERVE_PORT=str(serve_port if serve_port is not None else free_port()),
    )
    return env


def graphql(port: int, query: str, variables: dict | None = None) -> dict:
    """POST a GraphQL query to the webserver, as the UI does; fail on any GraphQL error."""
    response = requests.post(
        f"http://127.0.0.1:{port}/graphql",
        json={"query": query, "variables": variables or {}},
        timeout=30,
    )
    if response.status_code >= 400:  # say what the webserver said, not only its status
        raise requests.HTTPError(
            f"{response.status_code} from /graphql: {response.text[:2000]}", response=response
        )
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


def query_database(server_url: str, purpose: str, sql: str, args: tuple = ()) -> list[tuple]:
    """Run one query against a platform database (`dagster`, `app`) on the running server."""
    conn = psycopg2.connect(libpq_url(with_database(server_url, f"retrain_{purpose}")))
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    finally:
        conn.close()


# Runs a sensor executed in its own process (tagged by it) are named apart: no process of their own.
RUNS_BY_JOB = f"""
    SELECT r.pipeline_name || CASE WHEN t.value IS NULL THEN '' ELSE ' (in process)' END, count(*)
    FROM runs r LEFT JOIN run_tags t ON t.run_id = r.run_id AND t.key = '{REPORTER_TAG}'
    GROUP BY 1"""


def count_runs(server_url: str, entry: PlatformEntry) -> None:
    """Count the platform's Dagster runs by job into its ledger line, once, before it stops."""
    if entry.runs is not None or entry.runs_unknown is not None:
        return
    try:
        rows = query_database(server_url, "dagster", RUNS_BY_JOB)
    except psycopg2.Error as error:
        entry.uncounted(f"its database did not answer: {str(error).strip().splitlines()[0]}")
    else:
        entry.counted({str(job): int(count) for job, count in rows})


@dataclass
class RunningPlatform:
    """A `retrain-assets up` process and what a test needs to reach it."""

    process: subprocess.Popen
    port: int
    home: Path
    output: Path
    server_url: str
    stopped: Callable[[], None] = lambda: None  # told when `stop` has ended `up`
    stopping: Callable[[], None] = lambda: None  # told just before `stop` signals `up`

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        """Query this platform's webserver."""
        return graphql(self.port, query, variables)

    def query(self, purpose: str, sql: str, args: tuple = ()) -> list[tuple]:
        """Query one of this platform's databases."""
        return query_database(self.server_url, purpose, sql, args)

    def children(self) -> list[psutil.Process]:
        """Return every process `up` started."""
        return psutil.Process(self.process.pid).children(recursive=True)

    def gpu_url(self) -> str:
        """Return the URL of the GPU service, as `up` printed it in its ready block."""
        return wait_for_line(r"^\s+GPU service\s+(\S+)", self.output).group(1)

    def mlflow_url(self) -> str:
        """Return the MLflow tracking URI, as `up` printed it in its ready block."""
        return wait_for_line(r"^\s+MLflow\s+(\S+)", self.output).group(1)

    def serve_url(self) -> str:
        """Return the URL of the prediction service, as `up` printed it in its ready block."""
        return wait_for_line(r"^\s+Predictions\s+(\S+)", self.output).group(1)

    def serve_token(self) -> str:
        """Return the prediction service's bearer token `up` gave its children."""
        return self.environment()["RETRAIN_SERVE_TOKEN"]

    def gpu_token(self) -> str:
        """Return the bearer token `up` gave its children (random unless RETRAIN_GPU_TOKEN)."""
        for child in psutil.Process(self.process.pid).children():
            with contextlib.suppress(psutil.NoSuchProcess):
                token = child.environ().get("RETRAIN_GPU_TOKEN")
                if token:
                    return token
        pytest.fail("no child of `up` has RETRAIN_GPU_TOKEN")

    def environment(self) -> dict[str, str]:
        """Return the environment `up` gave dagster-daemon (database URLs, DAGSTER_HOME, ...)."""
        for child in self.children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if "dagster-daemon" in " ".join(child.cmdline()):
                    return child.environ()
        pytest.fail("no dagster-daemon among the children of `up`")

    def stop(self) -> int:
        """SIGTERM `up` and return its exit code."""
        self.stopping()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=STOP_SECONDS)
        self.stopped()
        return code


@contextlib.contextmanager
def running_platform(
    tmp_path: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> Iterator[RunningPlatform]:
    """Start `retrain-assets up` in a fresh RETRAIN_HOME on a free port; kill what is left.

    `env` adds variables (e.g. short sensor intervals) to what `up` and its processes get;
    `args` are added to its command line (e.g. `--no-demo`).
    """
    home, port, output = tmp_path / "home", free_port(), tmp_path / "up.out"
    entry = LEDGER.started()
    with output.open("wb") as out:
        process = subprocess.Popen(
            [*UP, *args],
            env={**up_environment(home, port), **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    children: list[psutil.Process] = []
    server_url = ""
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while "ready" not in output.read_text().splitlines():
            assert process.poll() is None, f"up exited {process.returncode}:\n{output.read_text()}"
            assert time.monotonic() < deadline, f"up never became ready:\n{output.read_text()}"
            time.sleep(0.5)
        entry.ready()
        server_url = wait_for_line(r"^\s+Postgres\s+(\S+)$", output).group(1)
        platform = RunningPlatform(
            process,
            port,
            home,
            output,
            server_url,
            entry.stopped,
            lambda: count_runs(server_url, entry),
        )
        children = platform.children()
        yield platform
    finally:
        if process.poll() is None and server_url:
            count_runs(server_url, entry)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        entry.stopped()


WEBSERVER = str(Path(sys.executable).parent / "dagster-webserver")


@contextlib.contextmanager
def running_webserver(env: dict[str, str], log: Path) -> Iterator[int]:
    """Start dagster-webserver on the repository's workspace with `env`; yield its port.

    For tests that made runs in-process on a Postgres instance and then read them the way the
    UI does.
    """
    port = free_port()
    argv = [WEBSERVER, "-h", "127.0.0.1", "-p", str(port), "-w", str(repo_file("workspace.yaml"))]

    def answers() -> bool:
        return bool(graphql(port, "{ version }")["version"])

    with serving_process(argv, env, log, answers, "dagster-webserver"):
        yield port
