"""A real `mlflow server` on the test Postgres, started once for the registry tests."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import lightgbm
import numpy as np
import pandas as pd
import pytest
import requests

from retrain_assets.store.server import PostgresServer, ensure_database

MLFLOW = str(Path(sys.executable).parent / "mlflow")
STARTUP_SECONDS = 90
FEATURES = ["lag_7", "lag_28", "is_holiday"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_uri(
    pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Start `mlflow server` (backend: a fresh database on pg_server) and return its URI."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RETRAIN_DB_PREFIX", f"t{uuid.uuid4().hex[:10]}_")
        backend = ensure_database(pg_server, "mlflow")
    folder = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
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


@pytest.fixture(scope="module")
def example_frame() -> pd.DataFrame:
    """A few hundred rows of demand features."""
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            "lag_7": rng.uniform(0, 100, 300),
            "lag_28": rng.uniform(0, 100, 300),
            "is_holiday": rng.integers(0, 2, 300).astype("int64"),
        }
    )


@pytest.fixture(scope="module")
def model_file(example_frame: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny LightGBM model saved as text, as the GPU service writes it."""
    target = 0.6 * example_frame["lag_7"] + 0.3 * example_frame["lag_28"]
    booster = lightgbm.train(
        {"objective": "regression", "num_leaves": 4, "verbose": -1, "seed": 1},
        lightgbm.Dataset(example_frame[FEATURES], label=target),
        num_boost_round=5,
    )
    path = tmp_path_factory.mktemp("model") / "model.txt"
    booster.save_model(str(path))
    return path
