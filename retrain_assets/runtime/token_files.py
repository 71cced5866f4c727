"""The services' bearer tokens where a user can find them: owner-only files under RETRAIN_HOME.

`up` makes a random token per start for the GPU and prediction services (unless the
environment sets one) and hands it to its children. A second terminal has no way to know it,
so `up` also writes each to `$RETRAIN_HOME/tokens/<service>` (folder 0700, file 0600: readable
by the user who runs `up` only) and names the folder in its ready block; `retrain-assets token
serve` (or `gpu`) prints it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from retrain_assets.settings import DEV_TOKEN, retrain_home
from retrain_assets.settings_model import current_settings

TOKEN_VARIABLES = {"serve": "RETRAIN_SERVE_TOKEN", "gpu": "RETRAIN_GPU_TOKEN"}


def tokens_folder() -> Path:
    """Return the folder `up` writes the tokens to."""
    return retrain_home() / "tokens"


def write_token_files(env: Mapping[str, str]) -> Path:
    """Write each service's token of `env` to its owner-only file; return the folder."""
    folder = tokens_folder()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    for service, variable in TOKEN_VARIABLES.items():
        path = folder / service
        temporary = folder / f".{service}.tmp"
        temporary.unlink(missing_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(env[variable] + "\n")
        temporary.replace(path)
    return folder


def current_token(service: str) -> tuple[str, str]:
    """Return a service's token and its source: the environment, `up`'s file, else the default.

    Raises:
        ValueError: `service` is not `serve` or `gpu`.
    """
    variable = TOKEN_VARIABLES.get(service)
    if variable is None:
        raise ValueError(f"no token for {service!r}: name one of {', '.join(TOKEN_VARIABLES)}")
    token = current_settings().serve_token if service == "serve" else current_settings().gpu_token
    if token:
        return token, f"${variable}"
    path = tokens_folder() / service
    if path.exists():
        return path.read_text().strip(), str(path)
    return DEV_TOKEN, f"the development default (no ${variable}, no {path})"
