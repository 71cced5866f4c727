"""The one-service-per-database lock: a session advisory lock, kept, checked and re-taken.

Recovery requeues every `running` job, which is only right if no other live service runs
them, so one service owns a `gpu` database. The lock is a session-level
`pg_try_advisory_lock` on a connection of its own; a Postgres restart ends that session and
with it the lock. The scheduler therefore checks the lock's connection on every tick and,
once Postgres answers again, takes the lock back; if another service took it in the
meantime, this one must stop (`LockTaken`), never run jobs the other service owns.
"""

from __future__ import annotations

import logging
import time

import psycopg2
import psycopg2.extensions

from retrain_assets.store.database import one_row
from retrain_assets.store.server import libpq_url

SERVICE_LOCK_ID = 7_231_102  # pg_try_advisory_lock key: one service per `gpu` database
CONNECT_TIMEOUT_SECONDS = 5
ANOTHER_SERVICE = "another GPU service already runs on this database; stop it first"
log = logging.getLogger(__name__)


class LockTaken(Exception):
    """Another service holds the lock: this service no longer owns the database."""


class ServiceLock:
    """The lock and the connection (session) that holds it."""

    def __init__(self, url: str, lock_id: int = SERVICE_LOCK_ID) -> None:
        self.url = url
        self.lock_id = lock_id
        self._conn: psycopg2.extensions.connection | None = None

    def acquire(self, wait_seconds: float = 15.0) -> None:
        """Take the lock at startup, waiting a little for a killed service's session to end.

        A killed service's lock goes when Postgres notices its socket closed, which can take
        a moment, hence the wait. Raises ValueError when another service keeps it.
        """
        deadline = time.monotonic() + wait_seconds
        waited = False
        while not self.try_take():
            if time.monotonic() > deadline:
                raise ValueError(ANOTHER_SERVICE)
            if not waited:
                log.info("another GPU service holds this database; waiting up to %ss", wait_seconds)
                waited = True
            time.sleep(0.5)

    def try_take(self) -> bool:
        """Open a session and try the lock once; True when held (keeps the session).

        Raises psycopg2.OperationalError when Postgres cannot be reached.
        """
        self.close()
        conn = psycopg2.connect(libpq_url(self.url), connect_timeout=CONNECT_TIMEOUT_SECONDS)
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_try_advisory_lock(%s)", (self.lock_id,))
                held = bool(one_row(cur)[0])
        except BaseException:
            conn.close()
            raise
        if held:
            self._conn = conn
        else:
            conn.close()
        return held

    def is_held(self) -> bool:
        """Return True while the session holding the lock is alive (one `SELECT 1` on it)."""
        if self._conn is None or self._conn.closed:
            return False
        try:
            with self._conn.cursor() as cur:
                cur.execute("SELECT 1")
            return True
        except (psycopg2.OperationalError, psycopg2.InterfaceError):
            self.close()
            return False

    def retake(self) -> bool:
        """Take the lock back after its session ended; True when held again.

        Returns False while Postgres is still unreachable. Raises LockTaken when Postgres
        answers but another session holds the lock: another service owns the database now.
        """
        try:
            if self.try_take():
                return True
        except (psycopg2.OperationalError, psycopg2.InterfaceError):
            return False
        raise LockTaken(
            "another GPU service took this database's lock while the connection to Postgres "
            "was lost; this service stops so that only one runs its jobs"
        )

    def close(self) -> None:
        """End the session (which releases the lock if it was held)."""
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None
