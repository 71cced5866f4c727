"""Dagster's PostgreSQL storage, holding a pinged connection per storage in every process.

Outside the webserver, dagster-postgres opens a new connection for every query (`NullPool`).
A run stores each of its events with two or three of them: a year's feature backfill is
about 1,100 events and 3,300 connections, 3.6 ms each on the embedded server, a third of the
run's time (BENCHMARKS.md, "365-day single-run backfill"). This storage gives the run, event
log and schedule storages the pool Dagster itself gives the webserver (one held connection,
more opened under concurrency and closed after use) in every process that loads the instance:
run workers, the daemon, the CLI. Each connection is pinged on checkout, so a PostgreSQL
restart costs a reconnect, not a failed query (`pooled_connections`).

The event log also remembers which tables exist: dagster-postgres asks the catalog before
storing each asset event's tags (`has_table`, about 5 ms, three times a backfilled day). A
table, once there, stays: only a positive answer is kept.

`dagster.yaml` names it under `storage: custom:` with the same config as `storage: postgres:`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster_postgres import DagsterPostgresStorage, PostgresEventLogStorage
from dagster_postgres.utils import get_token_provider_from_config, pg_url_from_config

from retrain_assets.dagster_private import replace_event_log_storage, storage_engine
from retrain_assets.runtime.pooled_connections import ping_pooled_connections

# Connections beyond the held one, for concurrent threads (the daemon's sensor workers);
# they are closed when returned. Dagster's webserver uses 20.
MAX_OVERFLOW = 10
# A held connection is replaced after an hour, so none lives forever.
POOL_RECYCLE_SECONDS = 3600
NO_STATEMENT_TIMEOUT = 0


class TableCachingEventLogStorage(PostgresEventLogStorage):
    """The PostgreSQL event log, asking the catalog for a table only until it exists.

    Everything else is dagster-postgres' own: a partitioned check's evaluations are reported
    inside runs (`models/freshness_report.py`), which Dagster's stock storage keeps.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._tables_present: set[str] = set()
        super().__init__(*args, **kwargs)

    def has_table(self, table_name: str) -> bool:
        """Return whether `table_name` exists; a table seen once is not asked for again."""
        if table_name in self._tables_present:
            return True
        present = super().has_table(table_name)
        if present:
            self._tables_present.add(table_name)
        return present


class PooledPostgresStorage(DagsterPostgresStorage):
    """`DagsterPostgresStorage` with pooled, pinged connections instead of one per query."""

    def __init__(
        self,
        postgres_url: str,
        should_autocreate_tables: bool = True,
        inst_data: Any = None,  # Dagster's ConfigurableClassData, not exported
        token_provider: Any = None,
    ) -> None:
        super().__init__(postgres_url, should_autocreate_tables, inst_data, token_provider)
        event_log = TableCachingEventLogStorage(
            postgres_url, should_autocreate_tables, token_provider=token_provider
        )
        replace_event_log_storage(self, event_log)
        for storage in (self.run_storage, self.event_log_storage, self.schedule_storage):
            storage.optimize_for_webserver(
                statement_timeout=NO_STATEMENT_TIMEOUT,
                pool_recycle=POOL_RECYCLE_SECONDS,
                max_overflow=MAX_OVERFLOW,
            )
            ping_pooled_connections(storage_engine(storage))  # the engine that call made

    @classmethod
    def from_config_value(
        cls, inst_data: Any, config_value: Mapping[str, Any]
    ) -> PooledPostgresStorage:
        """Build it from the same config as `storage: postgres:` (URL or its parts)."""
        return cls(
            inst_data=inst_data,
            postgres_url=pg_url_from_config(config_value),
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
            token_provider=get_token_provider_from_config(config_value),
        )
