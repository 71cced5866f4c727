"""One resolver for every command: the running platform's endpoints, from `up`'s record.

A command given only RETRAIN_HOME (or the default home) would reach MLflow, the GPU service,
the prediction service and Postgres at their default ports, not at those `up` chose: `audit`
once waited 18 s on :5000. `apply_running_platform` fills the variables the settings read from
`$RETRAIN_HOME/platform.json` while its `up` runs. A variable set in the environment wins: so
does any variable that decides the same endpoint (RETRAIN_MLFLOW_PORT for MLflow's URI). A
record whose `up` is dead is ignored with a one-line note.
"""

from __future__ import annotations

import os
from collections.abc import Callable, MutableMapping
from pathlib import Path

from retrain_assets.runtime.platform_file import PlatformRecord, platform_file, read_platform_file

# endpoint recorded by `up` -> (the variable it fills, the variables that decide it when set)
ENDPOINT_VARIABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "mlflow_uri": ("MLFLOW_TRACKING_URI", ("RETRAIN_MLFLOW_PORT",)),
    "gpu_url": ("RETRAIN_GPU_URL", ("RETRAIN_GPU_PORT",)),
    "serve_url": ("RETRAIN_SERVE_URL", ("RETRAIN_SERVE_PORT",)),
    "webserver_port": ("RETRAIN_WEBSERVER_PORT", ()),
    "postgres_url": ("RETRAIN_PG_URL", ("RETRAIN_APP_PG_URL",)),
    "training_backend": ("RETRAIN_TRAINING_BACKEND", ()),
    "slurm_url": ("RETRAIN_SLURM_URL", ()),
    "slurm_conf": ("SLURM_CONF", ()),
}


def apply_running_platform(
    home: Path, note: Callable[[str], None], environ: MutableMapping[str, str] | None = None
) -> PlatformRecord | None:
    """Fill `environ` (default os.environ) from the live platform of `home`; return its record.

    Returns None, changing nothing, when no platform is recorded or its `up` is dead (then
    `note` gets one line saying so).

    Raises:
        PlatformFileError: the file is not a platform record.
    """
    env = os.environ if environ is None else environ
    record = read_platform_file(home)
    if record is None:
        return None
    if not record.up.is_running():
        note(
            f"ignoring {platform_file(home)}: its `up` (pid {record.up.pid}) is not running "
            "(`retrain-assets down` or the next `up` clears what it left)"
        )
        return None
    for endpoint, value in record.endpoints.items():
        variable, deciders = ENDPOINT_VARIABLES.get(endpoint, ("", ()))
        if variable and not any(env.get(v) for v in (variable, *deciders)):
            env[variable] = value
    return record
