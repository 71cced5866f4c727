"""The PostgreSQL server: the one named by `RETRAIN_PG_URL`, or an embedded one under RETRAIN_HOME.

Every database the platform needs (Dagster's instance, the project's own tables, later MLflow
and the GPU service) lives on this one server, each in a database of its own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import psycopg2.errors
from psycopg2 import sql
from sqlalchemy.engine import make_url

from retrain_assets.settings import database_name, retrain_home
from retrain_assets.settings_model import current_settings


@dataclass(frozen=True)
class PostgresServer:
    """A reachable server: its URL (any database) and whether we started it ourselves."""

    url: str
    embedded: bool

    def database_url(self, purpose: str) -> str:
        """Return a SQLAlchemy URL (psycopg2 driver) to this purpose's database."""
        return with_database(self.url, database_name(purpose))


def with_database(server_url: str, database: str) -> str:
    """Return `server_url` pointing at `database`, spelled `postgresql+psycopg2://`.

    SQLAlchemy 2.1 maps a bare `postgresql://` to psycopg 3, which dagster-postgres does not use.
    """
    url = make_url(server_url).set(drivername="postgresql+psycopg2", database=database)
    return url.render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """Return a URL psycopg2.connect accepts (it does not know the `+psycopg2` suffix)."""
    return url.replace("postgresql+psycopg2://", "postgresql://", 1)


def start_server(home: Path | None = None) -> PostgresServer:
    """Return the server from `RETRAIN_PG_URL`, else start (or attach to) the embedded one.

    The embedded server keeps its data in `$RETRAIN_HOME/pg` and listens on a Unix socket only,
    so it never collides with another PostgreSQL on this machine. Several processes may attach;
    the last one to exit stops it.
    """
    external = current_settings().pg_url
    if external:
        return PostgresServer(url=external, embedded=False)
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    pgdata = (home or retrain_home()) / "pg"
    pgdata.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset, already while pgserver imports
        warnings.simplefilter("ignore")
        import pgserver  # imported here: only the embedded default needs it

        server = pgserver.get_server(pgdata, cleanup_mode="stop")
    return PostgresServer(url=server.get_uri(), embedded=True)


def stop_embedded_server(home: Path | None = None) -> None:
    """Let go of this process's handle on the embedded server; the last handle stops it.

    pgserver does this from an atexit hook, which a process ended by `os._exit` (a
    pytest-xdist worker, a forked child) never runs.
    """
    import pgserver

    pgdata = ((home or retrain_home()) / "pg").resolve()
    if pgdata in pgserver.PostgresServer._instances:
        pgserver.PostgresServer._instances[pgdata].cleanup()


def ensure_database(server: PostgresServer, purpose: str) -> str:
    """Create this purpose's database if it is missing and return its URL."""
    url = server.database_url(purpose)
    name = database_name(purpose)
    admin = psycopg2.connect(libpq_url(with_database(server.url, "postgres")))
    try:
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchone() is None:
                # Another process may create it between our check and our CREATE.
                with contextlib.suppress(psycopg2.errors.DuplicateDatabase):
                    cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    finally:
        admin.close()
    return url


def embedded_postmaster_pid(home: Path | None = None) -> int | None:
    """Return the pid of the embedded server's postmaster (postmaster.pid's first line), if any."""
    pid_file = (home or retrain_home()) / "pg" / "postmaster.pid"
    try:
        first = pid_file.read_text().splitlines()[0]
    except (FileNotFoundError, IndexError):
        return None
    return int(first) if first.strip().isdigit() else None


def forget_handle(home: Path, pid: int) -> None:
    """Drop a dead process's handle on the embedded server (pgserver's `.handle_pids.json`).

    pgserver stops the server when the last handle lets go; a process killed hard never lets
    go, so its pid would keep every later `up` from stopping the server at its exit.
    """
    handles = home / "pg" / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except FileNotFoundError:
        return
    if not isinstance(pids, list):
        raise ValueError(f"{handles} is not a list of pids: {pids!r}")
    if pid in pids:
        handles.write_text(json.dumps([p for p in pids if p != pid]))
