"""`python -m retrain_assets.gpu.service`: the same options as `retrain-assets gpu-service`."""

from __future__ import annotations

import argparse
import sys

from retrain_assets.gpu.service.config import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_SLOTS
from retrain_assets.settings_model import check_settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the service's options to a parser (the project CLI's subcommand can reuse this)."""
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"default {DEFAULT_HOST}")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    parser.add_argument(
        "--slots", type=int, default=DEFAULT_SLOTS, help="jobs trained at once (worker processes)"
    )
    parser.add_argument(
        "--allow-faults", action="store_true", help="accept specs with injected faults (tests)"
    )
    parser.add_argument("--data-dir", default=None, help="default $RETRAIN_HOME/gpu")


def run(args: argparse.Namespace) -> int:
    """Serve with parsed options; a bad setting exits 2, a lost database lock 1, with the reason."""
    from retrain_assets.gpu.service.app import LostOwnership, serve

    try:
        check_settings()
        serve(args.host, args.port, args.slots, args.allow_faults, args.data_dir)
    except ValueError as error:
        print(f"gpu-service: {error}", file=sys.stderr)
        return 2
    except LostOwnership as lost:
        print(f"gpu-service: stopped: {lost}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and serve until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m retrain_assets.gpu.service")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
