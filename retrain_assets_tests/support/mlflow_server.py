"""A real `mlflow server` on the test Postgres: one per test session, started on first use."""

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from retrain_assets.store.server import PostgresServer, ensure_database
from retrain_assets_tests.support.processes import free_port, serving_process

MLFLOW = str(Path(sys.executable).parent / "mlflow")


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
    uri = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        return requests.get(f"{uri}/health", timeout=2).ok

    with serving_process(argv, env, folder / "mlflow.log", answers, "mlflow server"):
        yield uri
