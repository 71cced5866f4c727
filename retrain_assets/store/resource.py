"""The project's own database as a Dagster resource.

`retrain-assets up` exports RETRAIN_APP_PG_URL to the webserver, the daemon and every run. A
process started without it (a test calling `materialize`, a notebook) starts or attaches to
the embedded server itself, so the assets never depend on how they were launched.
"""

from __future__ import annotations

import functools
import os

import dagster as dg
from pydantic import Field

from retrain_assets.store.migrations import migrate
from retrain_assets.store.server import ensure_database, start_server


@functools.cache
def _prepared(url: str) -> str:
    migrate(url)
    return url


@functools.cache
def _embedded_app_url() -> str:
    return ensure_database(start_server(), "app")


class ProjectDatabase(dg.ConfigurableResource):
    """Connection URL of the project's tables (customers, snapshots, decisions, machines)."""

    url: str | None = Field(default=None, description="Default: $RETRAIN_APP_PG_URL, or embedded")

    def connection_url(self) -> str:
        """Return a migrated database URL, resolving the default at run time."""
        url = self.url or os.environ.get("RETRAIN_APP_PG_URL") or _embedded_app_url()
        return _prepared(url)
