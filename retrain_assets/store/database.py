"""Short-lived connections to the project's own database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg2
import psycopg2.extensions

from retrain_assets.store.server import libpq_url


@contextmanager
def connection(url: str) -> Iterator[psycopg2.extensions.connection]:
    """Yield one connection for many transactions (`with conn:` commits each); closed after."""
    conn = psycopg2.connect(libpq_url(url))
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def transaction(url: str) -> Iterator[psycopg2.extensions.cursor]:
    """Yield a cursor inside one transaction: committed on success, rolled back on any error."""
    conn = psycopg2.connect(libpq_url(url))
    try:
        with conn, conn.cursor() as cur:
            yield cur
    finally:
        conn.close()


def one_row(cur: psycopg2.extensions.cursor) -> tuple[Any, ...]:
    """Return the row of a statement that always yields one (an aggregate, an INSERT RETURNING).

    Raises:
        LookupError: the statement yielded no row after all (naming it), instead of a
            `TypeError` on `None[0]` further on.
    """
    row = cur.fetchone()
    if row is None:
        raise LookupError(f"no row from {cur.query!r}")
    return row
