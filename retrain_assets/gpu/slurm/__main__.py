"""`retrain-assets slurm`: run a one-node Slurm cluster under $RETRAIN_HOME/slurm until stopped.

For the Slurm backend on one machine (a demo, or trying the backend before pointing it at a
team's cluster): munged, slurmctld and slurmd on 127.0.0.1, slurmrestd on a unix socket. It
prints the variables that point the platform at it, and stops the daemons on SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from retrain_assets.gpu.slurm.cluster import (
    APT_PACKAGES,
    ClusterError,
    free_loopback_ports,
    start_cluster,
)
from retrain_assets.gpu.slurm.cluster_config import PARTITION, ClusterPorts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the command's options (ports of slurmctld and slurmd on 127.0.0.1)."""
    parser.add_argument("--controller-port", type=int, help="default: a free loopback port")
    parser.add_argument("--node-port", type=int, help="default: a free loopback port")


def run(args: argparse.Namespace) -> int:
    """Start the cluster, print how to use it, wait for SIGINT/SIGTERM; 2 if it cannot start."""
    from retrain_assets.settings import slurm_home

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    root = slurm_home()
    try:
        free = free_loopback_ports(2)  # two clusters on one host must not collide
        ports = ClusterPorts(args.controller_port or free[0], args.node_port or free[1])
        cluster = start_cluster(root, ports, die_with_parent=True)
    except ClusterError as error:
        print(f"slurm: {error}\n(packages: apt-get install -y {APT_PACKAGES})", file=sys.stderr)
        return 2
    print(
        f"Slurm cluster running under {root} (logs in {cluster.paths.log_dir}).\n"
        "Point the platform at it with:\n"
        "  export RETRAIN_TRAINING_BACKEND=slurm\n"
        f"  export RETRAIN_SLURM_URL={cluster.rest_url}\n"
        f"  export RETRAIN_SLURM_PARTITION={PARTITION}\n"
        f"Slurm commands need: export SLURM_CONF={cluster.paths.conf}",
        flush=True,
    )
    try:
        stop.wait()
    finally:
        cluster.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the cluster until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m retrain_assets.gpu.slurm")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
