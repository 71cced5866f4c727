"""Run the real GPU service as a subprocess for a test, and helpers to drive it over HTTP."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import requests

from retrain_assets.gpu.client import HttpGpuService
from retrain_assets_tests.support.processes import free_port, start_until_healthy, stop_with_sigterm
from retrain_assets_tests.support.waiting import patience

TOKEN = "test-token"
FEATURES = ["lag_7", "lag_14", "rolling_mean_7", "price", "on_promo", "day_of_week"]


def write_dataset(path: Path, rows: int = 3000, seed: int = 11) -> Path:
    """Write a small store-day-like Parquet dataset: six features and a Poisson label."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "lag_7": rng.poisson(5, rows).astype(float),
            "lag_14": rng.poisson(5, rows).astype(float),
            "rolling_mean_7": rng.gamma(5, 1, rows),
            "price": rng.uniform(1, 10, rows),
            "on_promo": rng.random(rows) < 0.2,
            "day_of_week": rng.integers(0, 7, rows),
        }
    )
    frame.loc[rng.random(rows) < 0.05, "lag_14"] = np.nan  # missing history, as in features
    rate = np.exp(
        0.4
        + 0.08 * frame["rolling_mean_7"]
        - 0.06 * frame["price"]
        + 0.5 * frame["on_promo"]
        + 0.1 * (frame["day_of_week"] >= 5)
    )
    frame["units_sold"] = rng.poisson(rate)
    frame.to_parquet(path)
    return path


def training_spec(dataset: Path, **overrides: Any) -> dict[str, Any]:
    """Return a small, quick spec; keyword arguments replace top-level fields."""
    spec: dict[str, Any] = {
        "customer": "acme",
        "dataset_url": dataset.as_uri(),
        "features": FEATURES,
        "params": {"num_boost_round": 40, "num_leaves": 15},
        "checkpoint_every": 10,
    }
    spec.update(overrides)
    return spec


@dataclass
class ServiceProcess:
    """One `python -m retrain_assets.gpu.service` process and how to reach it."""

    pg_url: str
    home: Path
    slots: int = 2
    allow_faults: bool = True
    token: str | None = TOKEN
    db_prefix: str = field(default_factory=lambda: f"g{uuid.uuid4().hex[:10]}_")
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        """Return the base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        """Return the service's data folder."""
        return self.home / "gpu"

    @property
    def log_path(self) -> Path:
        """Return the log of the latest start."""
        return self.home / f"service-{self.starts}.log"

    def start(self) -> None:
        """Start the service and wait until /healthz answers."""
        self.starts += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("RETRAIN_")}
        env.update(
            RETRAIN_HOME=str(self.home),
            RETRAIN_PG_URL=self.pg_url,
            RETRAIN_DB_PREFIX=self.db_prefix,
        )
        if self.token is not None:
            env["RETRAIN_GPU_TOKEN"] = self.token
        command = [
            sys.executable,
            "-m",
            "retrain_assets.gpu.service",
            "--port",
            str(self.port),
            "--slots",
            str(self.slots),
            "--data-dir",
            str(self.data_dir),
        ]
        if self.allow_faults:
            command.append("--allow-faults")
        self.home.mkdir(parents=True, exist_ok=True)
        self.process = start_until_healthy(
            command, env, self.log_path, f"{self.url}/healthz", self.log
        )

    def stop(self) -> int:
        """Stop the service with SIGTERM (as `up` would) and return its exit code."""
        return stop_with_sigterm(self.process, self.log)

    def kill(self) -> None:
        """SIGKILL the service process alone, as a crash of the service would."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def log(self) -> str:
        """Return the latest start's output."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def client(self, timeout: float = 30.0) -> HttpGpuService:
        """Return the HTTP client pointed at this service."""
        return HttpGpuService(self.url, self.token or "dev-token", timeout)

    def call(
        self, method: str, path: str, token: str | None = "default", **kwargs: Any
    ) -> requests.Response:
        """Send one raw request (token "default": the service's own; None: no header)."""
        headers = kwargs.pop("headers", {})
        if token == "default":
            token = self.token or "dev-token"
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return requests.request(method, self.url + path, headers=headers, timeout=30, **kwargs)

    def job(self, job_id: str) -> dict[str, Any]:
        """Return a job's full JSON (with the service's progress extras)."""
        response = self.call("GET", f"/jobs/{job_id}")
        assert response.status_code == 200, response.text
        return response.json()

    def submit(self, key: str, spec: dict[str, Any]) -> requests.Response:
        """POST /jobs."""
        return self.call("POST", "/jobs", json={"idempotency_key": key, "spec": spec})

    def wait_for(
        self,
        job_id: str,
        condition: Callable[[dict[str, Any]], bool] | None = None,
        seconds: float = 60,
    ) -> dict[str, Any]:
        """Poll a job until `condition` holds (default: its status is final)."""
        condition = condition or (lambda job: job["status"] in ("succeeded", "failed", "cancelled"))
        deadline = time.monotonic() + patience(seconds)
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if condition(job):
                return job
            time.sleep(0.1)
        pytest.fail(f"job {job_id} never reached the condition; last: {job}\n{self.log()}")


@contextlib.contextmanager
def running_service(**kwargs: Any) -> Iterator[ServiceProcess]:
    """Start a service for the duration of the block; stop it (SIGTERM) afterwards."""
    service = ServiceProcess(**kwargs)
    service.start()
    try:
        yield service
    finally:
        service.stop()
