"""Per-test databases: copied once from migrated templates, emptied and reused after each test.

Creating Dagster's schema in an empty PostgreSQL database costs about 0.8 s (its tables and an
Alembic stamp), a SQLite test instance as much; the project's migrations about 0.2 s. Copying a
template that already holds them (`CREATE DATABASE ... TEMPLATE`) costs 0.1-0.3 s, and each
copy stays on disk: a session left a gigabyte of copies per worker, which pytest then spent
10-20 s deleting. Dropping them is no cheaper: `DROP DATABASE` forces a checkpoint.

So a test leases a slot, a name prefix with its own project database (and, when the test asks,
its own Dagster database), and gives it back emptied: every table that was empty in the
template is truncated (tens of milliseconds), the rest (`schema_migrations`, Alembic's stamp,
Dagster's data-migration markers) keeps the template's rows. A slot under which anything else
was created (the GPU service's or MLflow's database in a system test), or that cannot be
emptied, is not used again: no test sees another test's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import psycopg2
from psycopg2 import sql

from retrain_assets.store.migrations import migrate
from retrain_assets.store.server import PostgresServer, libpq_url, with_database

# the storage class dagster.yaml names (retrain_assets/runtime/dagster_storage.py)
POOLED_STORAGE = {
    "module": "retrain_assets.runtime.dagster_storage",
    "class": "PooledPostgresStorage",
}
PROJECT, DAGSTER = "app", "dagster"
# emptying waits this long for a lock a test's leftover connection holds, then retires the slot
LOCK_TIMEOUT = "5s"


def postgres_storage(url: str) -> dict[str, object]:
    """Instance overrides: storage in the database at `url`, through dagster.yaml's class."""
    return {"storage": {"custom": {**POOLED_STORAGE, "config": {"postgres_url": url}}}}


def _admin(server: PostgresServer, database: str = "postgres") -> psycopg2.extensions.connection:
    conn = psycopg2.connect(libpq_url(with_database(server.url, database)))
    conn.autocommit = True
    return conn


def run_admin(server: PostgresServer, statement: sql.Composable, *names: str) -> None:
    """Run one statement naming the databases `names`, outside a transaction."""
    conn = _admin(server)
    try:
        with conn.cursor() as cur:
            cur.execute(statement.format(*(sql.Identifier(name) for name in names)))
    finally:
        conn.close()


def _empty_tables(server: PostgresServer, database: str) -> list[str]:
    """Return the tables of `database` that hold no row (the ones a test's rows land in)."""
    conn = _admin(server, database)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            tables = [name for (name,) in cur.fetchall()]
            empty = []
            for name in tables:
                cur.execute(sql.SQL("SELECT EXISTS (SELECT FROM {})").format(sql.Identifier(name)))
                if not cur.fetchone()[0]:
                    empty.append(name)
            return sorted(empty)
    finally:
        conn.close()


@dataclass
class Slot:
    """A name prefix and the databases the pool made under it."""

    prefix: str
    made: set[str] = field(default_factory=set)  # purposes: "app", "dagster"

    def name(self, purpose: str) -> str:
        return f"{self.prefix}{purpose}"


@dataclass
class DatabasePool:
    """This session's templates on one server, and the slots free for the next test."""

    server: PostgresServer
    session: str = field(default_factory=lambda: f"tmpl{uuid.uuid4().hex[:8]}")
    free: list[Slot] = field(default_factory=list)
    truncated: dict[str, list[str]] = field(default_factory=dict)  # purpose -> tables

    def template(self, purpose: str) -> str:
        return f"{self.session}_{purpose}"

    def make_templates(self) -> None:
        """Create the migrated project template and the Dagster template."""
        for purpose in (PROJECT, DAGSTER):
            run_admin(self.server, sql.SQL("CREATE DATABASE {}"), self.template(purpose))
        migrate(with_database(self.server.url, self.template(PROJECT)))
        dagster_url = with_database(self.server.url, self.template(DAGSTER))
        with dg.instance_for_test(overrides=postgres_storage(dagster_url)):
            pass  # creating the instance creates and stamps Dagster's tables
        for purpose in (PROJECT, DAGSTER):
            self.truncated[purpose] = _empty_tables(self.server, self.template(purpose))

    def url(self, slot: Slot, purpose: str) -> str:
        """Return the URL of `purpose`'s database in `slot`, copying its template the first time."""
        if purpose not in slot.made:
            run_admin(
                self.server,
                sql.SQL("CREATE DATABASE {} TEMPLATE {}"),
                slot.name(purpose),
                self.template(purpose),
            )
            slot.made.add(purpose)
        return with_database(self.server.url, slot.name(purpose))

    @contextmanager
    def lease(self) -> Iterator[Slot]:
        """Lend a slot to one test; take it back emptied, or retire it."""
        slot = self.free.pop() if self.free else Slot(f"t{uuid.uuid4().hex[:10]}_")
        yield slot
        if self._only_ours(slot) and all(self._emptied(slot, p) for p in sorted(slot.made)):
            self.free.append(slot)

    def _only_ours(self, slot: Slot) -> bool:
        """Whether every database under the slot's prefix is one the pool made."""
        conn = _admin(self.server)
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT datname FROM pg_database WHERE starts_with(datname, %s)",
                    (slot.prefix,),
                )
                return {name for (name,) in cur.fetchall()} == {slot.name(p) for p in slot.made}
        finally:
            conn.close()

    def _emptied(self, slot: Slot, purpose: str) -> bool:
        """Truncate the tables a test writes; False if that failed (the slot is retired)."""
        tables = self.truncated[purpose]
        if not tables:
            return True
        statement = sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
            sql.SQL(", ").join(sql.Identifier(name) for name in tables)
        )
        try:
            conn = _admin(self.server, slot.name(purpose))
        except psycopg2.Error:
            return False
        try:
            with conn.cursor() as cur:
                cur.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
                cur.execute(statement)
            return True
        except psycopg2.Error:
            return False  # e.g. a connection the test left open holds a lock
        finally:
            conn.close()

    def drop_templates(self) -> None:
        """Drop the templates (an external server outlives the session; its slots stay)."""
        for purpose in (PROJECT, DAGSTER):
            run_admin(self.server, sql.SQL("DROP DATABASE IF EXISTS {}"), self.template(purpose))


def make_pool(server: PostgresServer) -> DatabasePool:
    """Create this session's pool and its templates on `server`."""
    pool = DatabasePool(server)
    pool.make_templates()
    return pool


def stop_without_checkpoint(home: Path) -> None:
    """Stop the embedded server under `home` at once (`-m immediate`): its data is discarded.

    A normal stop first writes every dirty buffer out, seconds at the end of each test worker
    for data nobody reads again.
    """
    import pgserver
    from pgserver._commands import pg_ctl

    pgdata = (home / "pg").resolve()
    server = pgserver.PostgresServer._instances.get(pgdata)
    if server is not None:
        pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=pgdata, user=server.system_user)


def skip_durability(server: PostgresServer) -> None:
    """Let the session's throwaway server skip flushing to disk (fsync, commit waits).

    Its data dies with the session, and a test waits on every commit and copied database.
    """
    conn = _admin(server)
    try:
        with conn.cursor() as cur:
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                cur.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
            cur.execute("SELECT pg_reload_conf()")
    finally:
        conn.close()
