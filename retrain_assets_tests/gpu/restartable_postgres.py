"""A PostgreSQL of a test's own, in a temp folder, that the test may stop and start again.

The session's `pg_server` is shared by every test, so a test that restarts Postgres under a
running service gets this one instead: pgserver initialises and starts it, and `stop` /
`start` run pgserver's own `pg_ctl` on the same data folder and socket directory, so the
URL stays the same across restarts. Never the machine's system Postgres.

The folder is a fresh temporary directory of its own, not pytest's `tmp_path`: run as root,
pgserver runs Postgres as another user and opens the folders above the data folder to it,
and a concurrent pytest session closes its own root folder again (mode 0700), which would
lock that user out in the middle of the test.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class RestartablePostgres:
    """One pgserver-managed server: its data folder, socket directory and URL."""

    server: Any  # pgserver.PostgresServer

    @property
    def url(self) -> str:
        """Return the server URL (Unix socket; the same after every restart)."""
        return self.server.get_uri()

    @property
    def pgdata(self) -> Path:
        """Return the data folder."""
        return Path(self.server.pgdata)

    def stop(self) -> None:
        """Stop the server now (fast shutdown: open sessions are ended, as in a crash)."""
        import pgserver

        pgserver.pg_ctl(
            ["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self.server.system_user
        )

    def start(self) -> None:
        """Start the server again on the same data folder and socket directory."""
        import pgserver

        socket_dir = self.server.get_postmaster_info().socket_dir
        pgserver.pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(self.server.log), "start"],
            pgdata=self.pgdata,
            user=self.server.system_user,
            timeout=60,
        )
        from pgserver.utils import PostmasterInfo

        # pgserver remembers the postmaster it started; point it at the new one so that its
        # own cleanup (here and at exit) stops this server, not a process that is gone.
        self.server._postmaster_info = PostmasterInfo.read_from_pgdata(self.pgdata)

    def running(self) -> bool:
        """Return whether the server's postmaster is running."""
        from pgserver.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        return info is not None and info.is_running()


@contextlib.contextmanager
def restartable_postgres() -> Iterator[RestartablePostgres]:
    """Start a dedicated server in a new temporary folder; stop it and delete the folder after."""
    folder = Path(tempfile.mkdtemp(prefix="retrain-test-pg-"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            import pgserver

            server = pgserver.get_server(folder / "pg", cleanup_mode="stop")
        postgres = RestartablePostgres(server)
        try:
            yield postgres
        finally:
            if not postgres.running():  # the test failed while it was stopped
                postgres.start()
            server.cleanup()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
