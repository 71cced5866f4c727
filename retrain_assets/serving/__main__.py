"""`python -m retrain_assets.serving`: the same options as `retrain-assets serve`."""

from __future__ import annotations

import argparse
import sys

from retrain_assets.settings import serve_port
from retrain_assets.settings_model import check_settings

DEFAULT_HOST = "127.0.0.1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the service's options to a parser (the project CLI's subcommand reuses this)."""
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"default {DEFAULT_HOST}")
    parser.add_argument(
        "--port", type=int, default=None, help="default $RETRAIN_SERVE_PORT, else 8080"
    )


def run(args: argparse.Namespace) -> int:
    """Serve with parsed options; a bad setting or a taken port exits 2 with the reason."""
    from retrain_assets.serving.service import serve

    try:
        check_settings()
        serve(args.host, args.port if args.port is not None else serve_port())
    except ValueError as error:
        print(f"serve: {error}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and serve until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m retrain_assets.serving")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
