"""Run the real `retrain-assets serve` as a subprocess for a test, and drive it over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets_tests.serving.published import LATEST
from retrain_assets_tests.support.processes import free_port, start_until_healthy, stop_with_sigterm

TOKEN = "serving-test-token"
SERVE = [str(Path(sys.executable).parent / "retrain-assets"), "serve"]


def feature_row(store_id: str, item_id: str, day: str = LATEST.isoformat(), seed: int = 0) -> dict:
    """Return one JSON-route row: the identity and every feature (deterministic values).

    Its day is the published history's latest (`published.LATEST`): a day served.
    """
    values = {name: float((seed * 7 + i * 3) % 40) for i, name in enumerate(MODEL_FEATURES)}
    values["on_promo"] = float(seed % 2)
    values["day_of_week"] = float(seed % 7)
    return {"store_id": store_id, "item_id": item_id, "date": day, **values}


@dataclass
class ServingProcess:
    """One `retrain-assets serve` process on a free port, against a given database and MLflow."""

    app_db: str
    mlflow_uri: str
    home: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        """Return the base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """Return the output of the latest start."""
        return self.home / f"serve-{self.port}-{self.starts}.log"

    def start(self) -> None:
        """Start the service and wait until /v2/health/ready answers 200."""
        self.starts += 1
        self.home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RETRAIN_", "MLFLOW_"))}
        env.update(
            RETRAIN_HOME=str(self.home),
            RETRAIN_APP_PG_URL=self.app_db,
            MLFLOW_TRACKING_URI=self.mlflow_uri,
            RETRAIN_SERVE_TOKEN=TOKEN,
            RETRAIN_SERVE_REFRESH_SECONDS="0.5",
            **self.extra_env,
        )
        self.process = start_until_healthy(
            [*SERVE, "--port", str(self.port)],
            env,
            self.log_path,
            f"{self.url}/v2/health/ready",
            self.log,
        )

    def stop(self) -> int:
        """SIGTERM the service (as `up` would) and return its exit code."""
        return stop_with_sigterm(self.process, self.log)

    def kill(self) -> None:
        """SIGKILL the service, as a crash would."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def log(self) -> str:
        """Return the latest start's output."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def call(
        self, method: str, path: str, token: str | None = TOKEN, **kwargs: Any
    ) -> requests.Response:
        """Send one request (token None: no Authorization header)."""
        headers = kwargs.pop("headers", {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return requests.request(method, self.url + path, headers=headers, timeout=30, **kwargs)

    def forecast(self, customer: str, rows: list[dict], **kwargs: Any) -> requests.Response:
        """POST the rows to the JSON route."""
        return self.call("POST", f"/forecast/{customer}", json={"rows": rows}, **kwargs)


class Client(threading.Thread):
    """Sends JSON-route requests of fresh keys until stopped; records what was acknowledged."""

    def __init__(self, service: ServingProcess, customer: str, name: str, rows: int = 20) -> None:
        super().__init__(name=f"client-{name}", daemon=True)
        self.service, self.customer, self.tag, self.rows = service, customer, name, rows
        self.acknowledged: dict[str, tuple[str, str]] = {}  # request key -> (version, alias)
        self.failures: list[str] = []
        self.requests = 0
        self.stop = threading.Event()

    def run(self) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {TOKEN}"
        while not self.stop.is_set():
            self.requests += 1
            rows = [
                feature_row(f"{self.tag}-{self.requests}", f"I{i}", seed=i)
                for i in range(self.rows)
            ]
            try:
                response = session.post(
                    f"{self.service.url}/forecast/{self.customer}", json={"rows": rows}, timeout=30
                )
            except requests.RequestException as error:
                self.failures.append(f"request {self.requests}: {type(error).__name__}")
                continue
            if response.status_code != 200:
                self.failures.append(
                    f"request {self.requests}: {response.status_code} {response.text}"
                )
                continue
            for row in response.json()["predictions"]:
                self.acknowledged[row["request_key"]] = (row["model_version"], row["alias"])
