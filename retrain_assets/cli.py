"""The `retrain-assets` command line: start the platform, simulate demo data, migrate."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from retrain_assets.demo.seed import land_demo_tenants
from retrain_assets.gpu.service.__main__ import add_arguments as add_gpu_arguments
from retrain_assets.gpu.service.__main__ import run as run_gpu_service
from retrain_assets.settings import landing_root


def _simulate(args: argparse.Namespace) -> int:
    start = dt.date.fromisoformat(args.start) if args.start else None
    for spec, days in land_demo_tenants(landing_root(), args.days, start):
        span = f"{days[0]} .. {days[-1]}" if days else "nothing new (pass --days N)"
        print(f"{spec.name} ({spec.country}): {len(days)} file(s) {span}")
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


def _up(_: argparse.Namespace) -> int:
    from retrain_assets.runtime.up import run_up  # imported here: only `up` needs it

    try:
        return run_up()
    except FileNotFoundError as err:  # dagster.yaml or workspace.yaml missing: nothing started
        raise ValueError(str(err)) from err


def _customers_add(args: argparse.Namespace) -> int:
    from retrain_assets.runtime.customers_admin import add_customer

    new_row, new_partition = add_customer(args.name, args.country)
    state = "added" if new_row or new_partition else "already known"
    print(f"customer {args.name}: {state} (partition in Dagster, row in the project table)")
    return 0


def _diagram(args: argparse.Namespace) -> int:
    from retrain_assets.machines.diagram import mermaid
    from retrain_assets.machines.training import training_machine

    machines = {"training": training_machine}
    print(mermaid(machines[args.machine]()))
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
    up = sub.add_parser(
        "up", help="start Postgres, dagster-webserver and dagster-daemon; Ctrl-C stops them all"
    )
    up.set_defaults(handler=_up)
    customers = sub.add_parser("customers", help="manage tenants").add_subparsers(
        dest="action", required=True
    )
    add = customers.add_parser("add", help="add a customer (a safe slug) without a landing folder")
    add.add_argument("name")
    add.add_argument("--country", default=None, help="two-letter code for holiday features")
    add.set_defaults(handler=_customers_add)
    gpu = sub.add_parser("gpu-service", help="run the reference GPU training service")
    add_gpu_arguments(gpu)
    gpu.set_defaults(handler=run_gpu_service)
    diagram = sub.add_parser("diagram", help="print a state machine as Mermaid, from its table")
    diagram.add_argument("machine", choices=["training"])
    diagram.set_defaults(handler=_diagram)
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
