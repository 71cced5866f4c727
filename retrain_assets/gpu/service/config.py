"""The service's settings: where it keeps files and which bearer token it accepts."""

from __future__ import annotations

import logging
from pathlib import Path

from retrain_assets.settings import DEFAULT_GPU_PORT, DEFAULT_GPU_SLOTS, DEV_TOKEN, retrain_home
from retrain_assets.settings_model import current_settings

TOKEN_ENV = "RETRAIN_GPU_TOKEN"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = DEFAULT_GPU_PORT
DEFAULT_SLOTS = DEFAULT_GPU_SLOTS

log = logging.getLogger(__name__)


def service_token() -> str:
    """Return `$RETRAIN_GPU_TOKEN`; when unset, the well-known dev token, with a warning.

    `retrain-assets up` sets a real token; the default only keeps a hand-started local service
    usable, and the warning says nobody should expose it like that.
    """
    token = current_settings().gpu_token
    if token:
        return token
    log.warning(
        "%s is not set: accepting the development token %r; set it before exposing the service",
        TOKEN_ENV,
        DEV_TOKEN,
    )
    return DEV_TOKEN


def default_data_dir() -> Path:
    """Return `$RETRAIN_HOME/gpu`, where jobs' checkpoints, models and worker logs live."""
    return retrain_home() / "gpu"
