"""What the children of `up` share: DAGSTER_HOME, its folders and the variables they read.

The children attach to the Postgres server `up` started (RETRAIN_PG_URL) instead of each
starting one, and find every path as an absolute variable, so they behave the same whatever
directory they are started from. They also share the GPU service's URL and bearer token (the
service `up` starts accepts exactly the token its clients send) and MLflow's tracking URI.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

import retrain_assets
from retrain_assets.settings import (
    dagster_home,
    gpu_service_url,
    gpu_token,
    mlflow_tracking_uri,
    retrain_home,
    serve_port,
)
from retrain_assets.settings_model import current_settings
from retrain_assets.store.server import PostgresServer


@dataclass(frozen=True)
class DagsterFolders:
    """The Dagster instance's home and the folders its dagster.yaml points at."""

    home: Path
    artifacts: Path
    compute_logs: Path


def repo_file(name: str) -> Path:
    """Return a file at the repository root (the parent of the `retrain_assets` package).

    `up` reads dagster.yaml from the checkout it runs from (`make install` installs the package
    in editable mode), so an edit to it applies on the next start.

    Raises:
        FileNotFoundError: the package is not running from a checkout that has the file.
    """
    root = Path(retrain_assets.__file__).resolve().parent.parent
    path = root / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{name} not found at {path}: run from a checkout of the repository "
            "(make install installs it in editable mode)"
        )
    return path


def prepare_dagster_home(dagster_yaml: Path) -> DagsterFolders:
    """Copy `dagster_yaml` into DAGSTER_HOME and create the folders it names.

    The copy is refreshed on every start: the repository's file is the one to edit.
    """
    home = retrain_home()
    folders = DagsterFolders(
        home=dagster_home(),
        artifacts=home / "dagster_artifacts",
        compute_logs=home / "logs" / "compute",
    )
    for folder in (folders.home, folders.artifacts, folders.compute_logs):
        folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(dagster_yaml, folders.home / "dagster.yaml")
    return folders


def remote_gpu_url() -> str | None:
    """Return `$RETRAIN_GPU_URL` when the user points the platform at a GPU service, else None.

    Set, it names a service someone else runs, so `up` neither starts a local one nor checks
    the local service's port.
    """
    return current_settings().gpu_url


def remote_mlflow_uri() -> str | None:
    """Return `$MLFLOW_TRACKING_URI` when the user points the platform at an MLflow server.

    Set, it names a server someone else runs, so `up` neither starts the local MLflow server
    nor checks its port.
    """
    return current_settings().mlflow_tracking_uri


def children_gpu_token() -> str:
    """Return the bearer token the children of one `up` share with its GPU service.

    `$RETRAIN_GPU_TOKEN` when set. Otherwise a fresh random token for the local service, so it
    never runs with the well-known dev token under `up`; a remote service cannot know a token
    made up here, so with RETRAIN_GPU_URL set the clients fall back to `gpu_token()`'s default.
    """
    if current_settings().gpu_token or remote_gpu_url():
        return gpu_token()
    return secrets.token_urlsafe(32)


def children_serve_token() -> str:
    """Return the bearer token of the prediction service `up` starts, shared by its children.

    `$RETRAIN_SERVE_TOKEN` when set, otherwise a fresh random token, so the service never runs
    with the well-known dev token under `up`.
    """
    return current_settings().serve_token or secrets.token_urlsafe(32)


def child_environment(
    server: PostgresServer, folders: DagsterFolders, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Return the environment of every child: `base` (default: ours) plus the platform's.

    The GPU and prediction service tokens may be random (`children_gpu_token()`,
    `children_serve_token()`): call this once per `up` and give every child the same result,
    so each service and its clients agree.
    """
    env = dict(os.environ if base is None else base)
    # Only `mlflow server` reads it: without it the server forks a job runner and seven huey
    # consumers for GenAI jobs this platform never submits.
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    env.update(
        {
            "DAGSTER_HOME": str(folders.home),
            "RETRAIN_HOME": str(retrain_home()),
            "RETRAIN_PG_URL": server.url,
            "RETRAIN_DAGSTER_PG_URL": server.database_url("dagster"),
            "RETRAIN_APP_PG_URL": server.database_url("app"),
            "RETRAIN_DAGSTER_ARTIFACTS_DIR": str(folders.artifacts),
            "RETRAIN_DAGSTER_COMPUTE_LOGS_DIR": str(folders.compute_logs),
            "RETRAIN_GPU_URL": gpu_service_url(),
            "RETRAIN_GPU_TOKEN": children_gpu_token(),
            "MLFLOW_TRACKING_URI": mlflow_tracking_uri(),
            "RETRAIN_SERVE_URL": f"http://127.0.0.1:{serve_port()}",
            "RETRAIN_SERVE_TOKEN": children_serve_token(),
            "PYTHONUNBUFFERED": "1",  # their log files show each line as it happens
        }
    )
    return env


def redact_url(url: str) -> str:
    """Return `url` with any password hidden, unchanged when it has none (embedded server)."""
    parsed = make_url(url)
    if not parsed.password:
        return url
    return parsed.render_as_string(hide_password=True)
