"""The `retrain-assets` command line: simulate demo data and prepare the project's database."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from retrain_assets.demo.simulate import days_to_land, land_tenant, landed_days
from retrain_assets.demo.tenants import DEMO_TENANTS
from retrain_assets.settings import landing_root


def _simulate(args: argparse.Namespace) -> int:
    root = landing_root()
    yesterday = dt.date.today() - dt.timedelta(days=1)
    start = dt.date.fromisoformat(args.start) if args.start else None
    for spec in DEMO_TENANTS:
        days = days_to_land(landed_days(root, spec.name), args.days, start, yesterday)
        written = land_tenant(root, spec, days)
        span = f"{days[0]} .. {days[-1]}" if days else "nothing new (pass --days N)"
        print(f"{spec.name} ({spec.country}): {written} file(s) {span}")
    return 0


def _migrate(_: argparse.Namespace) -> int:
    from retrain_assets.store.migrations import migrate
    from retrain_assets.store.server import ensure_database, start_server

    server = start_server()
    url = ensure_database(server, "app")
    version = migrate(url)
    kind = "embedded" if server.embedded else "RETRAIN_PG_URL"
    print(f"project database ready ({kind} server), schema version {version}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser for every subcommand."""
    parser = argparse.ArgumentParser(prog="retrain-assets", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="land demo tenants' daily files in the landing zone")
    sim.add_argument("--days", type=int, default=None, help="days to land (new tenants: 120)")
    sim.add_argument("--start", default=None, help="first day for a tenant with no history")
    sim.set_defaults(handler=_simulate)
    mig = sub.add_parser("migrate", help="start Postgres if needed and create the project tables")
    mig.set_defaults(handler=_migrate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; a bad input exits 2 with the reason."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ValueError as err:
        print(f"retrain-assets {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
