"""Where a local run keeps its files and which servers it talks to.

Everything is resolved when a function is called, never at import time, so a test or a child
process can point the whole project somewhere else by setting environment variables. Every
variable the package reads, here or elsewhere, is a field of `RetrainSettings`
(settings_model/model.py), which types, bounds and documents it; these functions read it
from there.
"""

from __future__ import annotations

import sys
from pathlib import Path

from retrain_assets.settings_model import FIELDS, current_settings

# The GPU and prediction services' well-known development token: a hand-started local service
# and its client agree without configuration. `up` never uses it (it exports random tokens).
DEV_TOKEN = "dev-token"
DEFAULT_GPU_PORT: int = FIELDS["gpu_port"].default  # the GPU service's own default port
DEFAULT_GPU_SLOTS: int = FIELDS["gpu_slots"].default


def retrain_home() -> Path:
    """Return `$RETRAIN_HOME` (default `./.retrain`): deleting it is a full local reset."""
    return Path(current_settings().home).expanduser().resolve()


def landing_root() -> str:
    """Return where customers' daily files land (a folder or an object-storage URL)."""
    return current_settings().landing_url or str(retrain_home() / "landing")


def storage_root() -> str:
    """Return where asset partitions are stored as Parquet (a folder or an object-storage URL)."""
    return current_settings().storage_url or str(retrain_home() / "storage")


def dagster_home() -> Path:
    """Return the DAGSTER_HOME that `up` and the CLI share."""
    return retrain_home() / "dagster_home"


def database_name(purpose: str) -> str:
    """Return the database used for one purpose (`dagster`, `app`, ...) on the shared server."""
    return current_settings().db_prefix + purpose


def webserver_port() -> int:
    """Return the port dagster-webserver listens on (default 3000)."""
    return current_settings().webserver_port


def gpu_service_port() -> int:
    """Return the port of the GPU service `up` starts (default 8765, the service's own default).

    Only the local service uses it; a service at RETRAIN_GPU_URL listens wherever it was put.
    """
    return current_settings().gpu_port


def gpu_service_url() -> str:
    """Return where the platform reaches the GPU service.

    `$RETRAIN_GPU_URL` when set (a remote service: `up` then starts no local one), else the
    local service `up` starts on loopback at `gpu_service_port()`.
    """
    return current_settings().gpu_url or f"http://127.0.0.1:{gpu_service_port()}"


def gpu_token() -> str:
    """Return the GPU service's bearer token, `$RETRAIN_GPU_TOKEN`.

    The default is the service's well-known development token, so a client and a hand-started
    local service agree without configuration; `up` never relies on it for its own service
    (it exports a random token when the variable is unset).
    """
    return current_settings().gpu_token or DEV_TOKEN


def gpu_slots() -> int:
    """Return how many jobs the local GPU service trains at once (default 2 worker processes).

    Each slot is a worker process with its own model in memory: size it to the GPUs (or cores)
    of the machine.
    """
    return current_settings().gpu_slots


def gpu_allow_faults() -> bool:
    """Return whether the local GPU service accepts fault injection in job specs (default no).

    Only tests that exercise crash and resume paths turn it on (`RETRAIN_GPU_ALLOW_FAULTS=1`
    or `true`); a production service must refuse such specs.
    """
    return current_settings().gpu_allow_faults


def training_backend() -> str:
    """Return which training backend the platform submits to: `reference` (default) or `slurm`.

    Raises:
        SettingsError: RETRAIN_TRAINING_BACKEND names neither (or another setting is bad).
    """
    return current_settings().training_backend


def slurm_home() -> Path:
    """Return the folder `retrain-assets slurm` keeps its one-node cluster in."""
    return retrain_home() / "slurm"


def slurm_url() -> str:
    """Return where slurmrestd answers: `unix:///path` or `http(s)://host:port`.

    Default: the unix socket of the cluster `retrain-assets slurm` starts under RETRAIN_HOME.
    """
    return current_settings().slurm_url or f"unix://{slurm_home() / 'slurmrestd.socket'}"


def slurm_token() -> str | None:
    """Return the `auth/jwt` token for a remote slurmrestd (None: `rest_auth/local`)."""
    return current_settings().slurm_token


def slurm_user() -> str | None:
    """Return the Slurm user name sent with the token (X-SLURM-USER-NAME), if any."""
    return current_settings().slurm_user


def slurm_partition() -> str | None:
    """Return the partition training jobs queue in (None: the cluster's default partition)."""
    return current_settings().slurm_partition


def slurm_time_limit_minutes() -> int:
    """Return each training job's time limit in minutes (default 360: five hours and a margin)."""
    return current_settings().slurm_time_limit_minutes


def slurm_gres() -> str | None:
    """Return the generic resources each job asks for, e.g. `gpu:1` (None: no GPU asked)."""
    return current_settings().slurm_gres


def slurm_storage() -> Path:
    """Return the folder, shared with every Slurm node, for specs, checkpoints and models."""
    shared = current_settings().slurm_storage
    return Path(shared).expanduser().resolve() if shared else slurm_home() / "jobs"


def slurm_python() -> str:
    """Return the Python the batch jobs run on the nodes (default: this process's own)."""
    return current_settings().slurm_python or sys.executable


def mlflow_port() -> int:
    """Return the port of the MLflow tracking server `up` starts (default 5000, MLflow's own)."""
    return current_settings().mlflow_port


def mlflow_tracking_uri() -> str:
    """Return where the platform reaches MLflow's tracking server and model registry.

    `$MLFLOW_TRACKING_URI` when set (a server someone else runs: `up` then starts no local
    one), else the local server `up` starts on loopback at `mlflow_port()`.
    """
    return current_settings().mlflow_tracking_uri or f"http://127.0.0.1:{mlflow_port()}"


def mlflow_artifacts_root() -> str:
    """Return where the local MLflow server `up` starts keeps artifacts (models, plots).

    RETRAIN_MLFLOW_ARTIFACTS_URL names object storage (e.g. `s3://bucket/mlflow`) instead of
    the folder under RETRAIN_HOME; the server reads and writes it, clients never touch it.
    """
    return current_settings().mlflow_artifacts_url or str(retrain_home() / "mlflow-artifacts")


def gate_margin() -> float:
    """Return how much lower (relative) a candidate's WAPE must be to pass the gate.

    Raises:
        SettingsError: RETRAIN_GATE_MARGIN is not a number in [0, 1) (or another setting is bad).
    """
    return current_settings().gate_margin


def serve_port() -> int:
    """Return the port of the prediction service `up` starts (default 8080)."""
    return current_settings().serve_port


def serve_url() -> str:
    """Return where clients reach the prediction service.

    `$RETRAIN_SERVE_URL` when set, else the local service `up` starts on loopback at
    `serve_port()`.
    """
    return current_settings().serve_url or f"http://127.0.0.1:{serve_port()}"


def serve_token() -> str:
    """Return the prediction service's bearer token, `$RETRAIN_SERVE_TOKEN` (default dev-token).

    As with the GPU service, the default only keeps a hand-started local service and its client
    in agreement; `up` exports a random token when the variable is unset, and the service warns
    when it runs with the default.
    """
    return current_settings().serve_token or DEV_TOKEN


def serve_max_models() -> int:
    """Return how many models the prediction service keeps loaded at once (default 32).

    Each is one (customer, version) LightGBM booster; the least recently used one is dropped
    when a new one is loaded past this bound.
    """
    return current_settings().serve_max_models


def serve_max_rows() -> int:
    """Return the most rows one prediction request may carry (default 10,000; more is a 413)."""
    return current_settings().serve_max_rows


def serve_max_history_mb() -> float:
    """Return the memory the prediction service gives customers' feature tables (default 512 MB).

    Past it the least recently asked customer's table is dropped and rebuilt when next asked.
    """
    return current_settings().serve_max_history_mb


def serve_refresh_seconds() -> float:
    """Return how often the prediction service reads changed `serving_routes` rows (default 2)."""
    return current_settings().serve_refresh_seconds


def ready_timeout_seconds() -> float:
    """Return how long `up` waits for each process to answer once started (a loaded host: more).

    Raises:
        SettingsError: RETRAIN_READY_TIMEOUT_SECONDS is not a positive number (or another
            setting is bad).
    """
    return current_settings().ready_timeout_seconds
