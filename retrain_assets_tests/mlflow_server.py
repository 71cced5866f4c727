"""A real `mlflow server` on the test Postgres: one per test session, started on first use."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from retrain_assets.store.server import PostgresServer, ensure_database
from retrain_assets_tests.running_platform import free_port

MLFLOW = str(Path(sys.executable).parent / "mlflow")
STARTUP_SECONDS = 90


@contextlib.contextmanager
def running_mlflow(pg_server: PostgresServer, folder: Path) -> Iterator[str]:
    """Start `mlflow server` (backend: a fresh database on pg_server) and return its URI."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RETRAIN_DB_PREFIX", f"t{uuid.uuid4().hex[:10]}_")
        backend = ensure_database(pg_server, "mlflow")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    argv = [MLFLOW, "server", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--backend-store-uri", backend, "--artifacts-destination", str(folder / "artifacts")]
    argv += ["--serve-artifacts", "--workers", "1"]
    log = folder / "mlflow.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert server.poll() is None, f"mlflow server exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"mlflow never answered:\n{log.read_text()}"
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{uri}/health", timeout=2).ok:
                    break
            time.sleep(0.2)
        yield uri
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
