"""The webserver's pooled connections survive a Postgres restart (runtime/webserver.py).

A restart ends every server-side connection; `pg_terminate_backend` does the same to one, on
the session's real Postgres. The engine is shaped like dagster-postgres's webserver engines
(one pooled connection, autocommit).
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg2
import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from retrain_assets.runtime.pooled_connections import ping_on_checkout, ping_pooled_connections
from retrain_assets.store.server import libpq_url

SELECT_PID = sa.text("SELECT pg_backend_pid()")


@pytest.fixture
def held_engine(app_db: str) -> Iterator[Engine]:
    """An engine holding one pooled connection, as the webserver's storages do."""
    engine = sa.create_engine(app_db, pool_size=1, max_overflow=0, isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


def _kill_the_held_connection(engine: Engine, app_db: str) -> int:
    """Check a connection out and back in, then end it on the server side; return its pid."""
    with engine.connect() as conn:
        pid = conn.execute(SELECT_PID).scalar_one()
    admin = psycopg2.connect(libpq_url(app_db))
    try:
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
    finally:
        admin.close()
    return pid


def test_without_the_ping_the_first_query_after_a_restart_fails(held_engine, app_db):
    _kill_the_held_connection(held_engine, app_db)
    with pytest.raises(sa.exc.OperationalError), held_engine.connect() as conn:
        conn.execute(SELECT_PID)


def test_with_the_ping_a_dead_connection_is_replaced_before_the_query(held_engine, app_db):
    ping_pooled_connections(held_engine)
    try:
        dead = _kill_the_held_connection(held_engine, app_db)
        with held_engine.connect() as conn:
            assert conn.execute(SELECT_PID).scalar_one() != dead
    finally:
        event.remove(held_engine, "checkout", ping_on_checkout)


def test_the_ping_is_listened_once(held_engine):
    ping_pooled_connections(held_engine)
    ping_pooled_connections(held_engine)
    try:
        assert event.contains(held_engine, "checkout", ping_on_checkout)
    finally:
        event.remove(held_engine, "checkout", ping_on_checkout)
    assert not event.contains(held_engine, "checkout", ping_on_checkout)
