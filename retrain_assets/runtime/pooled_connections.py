"""Pooled database connections that are checked before each use.

A pooled connection outlives a PostgreSQL restart only as a dead socket: the first query on it
fails with "server closed the connection unexpectedly" before SQLAlchemy notices and
reconnects. Sending `SELECT 1` on checkout (about 0.1 ms on the same machine) and swapping a
dead connection for a fresh one means no request and no run sees an outage once PostgreSQL
answers again. The webserver and the Dagster storage of every other process use this.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.pool import QueuePool


def ping_on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Raise DisconnectionError for a dead connection: the pool then opens a fresh one."""
    try:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("SELECT 1")
        finally:
            cursor.close()
    except Exception as error:  # any failure of `SELECT 1` means the connection is unusable
        raise exc.DisconnectionError(f"pooled connection is dead: {error}") from error


def ping_pooled_connections(target: Any = QueuePool) -> None:
    """Check each connection of `target` (an engine, a pool, or every QueuePool) on checkout."""
    if not event.contains(target, "checkout", ping_on_checkout):
        event.listen(target, "checkout", ping_on_checkout)
