"""The project's own database as a Dagster resource.

`definitions.py` gives it RETRAIN_APP_PG_URL (`dg.EnvVar`), which `retrain-assets up` exports to
the webserver, the daemon and every run. A resource built by hand without a URL (a test calling
`materialize`, a notebook) starts or attaches to the embedded server instead, so the assets never
depend on how they were launched.
"""

from __future__ import annotations

import functools

import dagster as dg
from pydantic import Field, PrivateAttr

from retrain_assets.settings_model import current_settings
from retrain_assets.store.migrations import migrate
from retrain_assets.store.server import ensure_database, start_server

URL_ENV = "RETRAIN_APP_PG_URL"


@functools.cache
def _prepared(url: str) -> str:
    migrate(url)
    return url


@functools.cache
def _embedded_app_url() -> str:
    return ensure_database(start_server(), "app")


class DatabaseNotPrepared(RuntimeError):
    """`connection_url()` was asked before `prepare()` resolved and migrated the database."""


class ProjectDatabase(dg.ConfigurableResource):
    """Connection URL of the project's tables (customers, snapshots, decisions, machines).

    `prepare()` does the work (start the embedded server when no URL is known, migrate); Dagster
    calls it once when a run or a tick initializes the resource (`setup_for_execution`), and a
    command outside Dagster calls it itself. `connection_url()` only returns what it resolved.
    """

    url: str | None = Field(default=None, description=f"Default: ${URL_ENV}, or embedded")
    _prepared_url: str | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Prepare the database when a run or a sensor tick starts using the resource."""
        self.prepare()

    def prepare(self) -> str:
        """Resolve the URL (starting the embedded server if none is set), migrate, return it.

        Idempotent and cheap after the first call in a process.
        """
        url = self.url or current_settings().app_pg_url or _embedded_app_url()
        self._prepared_url = _prepared(url)
        return self._prepared_url

    def connection_url(self) -> str:
        """Return the migrated database URL that `prepare()` resolved.

        Raises:
            DatabaseNotPrepared: nothing called `prepare()` on this resource.
        """
        if self._prepared_url is None:
            raise DatabaseNotPrepared(
                "ProjectDatabase.prepare() was not called: Dagster calls it when a run or tick "
                "starts; code outside Dagster calls it before asking for the URL"
            )
        return self._prepared_url
