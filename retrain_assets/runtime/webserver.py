"""dagster-webserver, with its held database connections checked before each use.

In the webserver, dagster-postgres keeps one pooled connection per storage (run, event log,
schedule) and never pings it. After Postgres restarts, each of those dead connections fails
one UI request with "server closed the connection unexpectedly" before SQLAlchemy notices and
reconnects; the chaos suite saw the runs page answer 500 right after an outage. Upstream
tracks this (dagster-io/dagster#3812, pull request #33961 adds `--db-pool-pre-ping`); until a
release has it, `up` starts the webserver through this module, which pings a pooled
connection on checkout and swaps a dead one for a fresh one, so no request sees the outage
once Postgres answers again (`pooled_connections`). Every other process holds pooled, pinged
connections through the project's storage class (`dagster_storage`).
"""

from __future__ import annotations

from typing import NoReturn

from retrain_assets.runtime.pooled_connections import ping_pooled_connections


def run_webserver(host: str, port: int, workspace: str) -> NoReturn:
    """Serve the Dagster UI on `host:port` for `workspace`, pinging pooled connections."""
    from dagster_webserver.cli import cli

    ping_pooled_connections()
    args = ["-h", host, "-p", str(port), "-w", workspace]
    cli.main(args=args, prog_name="dagster-webserver", auto_envvar_prefix="DAGSTER_WEBSERVER")
    raise SystemExit(0)  # click exits with the server's status; this is never reached
