"""Where a local run keeps its files and which servers it talks to.

Everything is resolved when a function is called, never at import time, so a test or a child
process can point the whole project somewhere else by setting environment variables.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOME = ".retrain"
DEFAULT_DB_PREFIX = "retrain_"


def retrain_home() -> Path:
    """Return `$RETRAIN_HOME` (default `./.retrain`): deleting it is a full local reset."""
    return Path(os.environ.get("RETRAIN_HOME", DEFAULT_HOME)).expanduser().resolve()


def landing_root() -> str:
    """Return where customers' daily files land (a folder or an object-storage URL)."""
    return os.environ.get("RETRAIN_LANDING_URL") or str(retrain_home() / "landing")


def storage_root() -> str:
    """Return where asset partitions are stored as Parquet (a folder or an object-storage URL)."""
    return os.environ.get("RETRAIN_STORAGE_URL") or str(retrain_home() / "storage")


def dagster_home() -> Path:
    """Return the DAGSTER_HOME that `up` and the CLI share."""
    return retrain_home() / "dagster_home"


def database_name(purpose: str) -> str:
    """Return the database used for one purpose (`dagster`, `app`, ...) on the shared server."""
    return os.environ.get("RETRAIN_DB_PREFIX", DEFAULT_DB_PREFIX) + purpose


def webserver_port() -> int:
    """Return the port dagster-webserver listens on (default 3000)."""
    return int(os.environ.get("RETRAIN_WEBSERVER_PORT", "3000"))
