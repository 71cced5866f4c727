"""A background thread that re-reads a Postgres table every few seconds.

The prediction service follows two tables this way (`serving_routes`, `feature_snapshots`):
one connection kept open, a failed read remembered as `last_error` (logged once per new
reason, so an outage does not flood the log) and the connection reopened on the next try.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg2
import psycopg2.extensions

from retrain_assets.store.server import libpq_url

log = logging.getLogger(__name__)


class TableWatch:
    """Calls `refresh()` every `interval` s in a daemon thread until `stop()`."""

    def __init__(self, url: str, interval: float, table: str) -> None:
        """Watch `table` in the database at `url` (the name is for the log and the thread)."""
        self.url = url
        self.interval = interval
        self.watched_table = table
        self.last_error: str | None = None
        self.last_success: float | None = None
        self._conn: psycopg2.extensions.connection | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{table}-watch", daemon=True)

    def refresh(self) -> None:
        """Read the table once (each subclass); psycopg2.Error when Postgres did not answer."""
        raise NotImplementedError

    def start(self) -> None:
        """Start refreshing in the background."""
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop refreshing and close the connection."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self.refresh()
                except psycopg2.Error as error:
                    reason = str(error).strip() or type(error).__name__
                    if self.last_error != reason:
                        log.warning("cannot read %s: %s", self.watched_table, reason)
                    self.last_error = reason
                else:
                    self.last_error = None
                    self.last_success = time.monotonic()
                self._stop.wait(self.interval)
        finally:
            self._close()

    def _connection(self) -> psycopg2.extensions.connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg2.connect(libpq_url(self.url), connect_timeout=5)
            self._conn.autocommit = True
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
