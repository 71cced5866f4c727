"""`python -m retrain_assets.gpu.slurm.daemon <cluster folder> <daemon>`: exec one Slurm daemon.

`retrain-assets up` supervises each daemon of its one-node cluster as a child of its own (a
crash is restarted with backoff and logged, like any other child), and a child is one command
line with the platform's environment. This launcher gives the daemon what it needs and then
becomes it (exec): SLURM_CONF (without it Slurm asks DNS for its configuration, off loopback),
no socket left by a killed predecessor (it would refuse the bind), and for slurmrestd a
controller that answers first, so `up` says ready only once jobs can be submitted.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from retrain_assets.gpu.slurm.cluster import (
    DAEMONS,
    ClusterError,
    cluster_environment,
    command,
    controller_answers,
)
from retrain_assets.gpu.slurm.cluster_config import ClusterPaths

CONTROLLER_WAIT_SECONDS = 120.0


def prepare(paths: ClusterPaths, name: str) -> list[str]:
    """Return the daemon's command line once it may start (see the module doc).

    Raises:
        ClusterError: the daemon is unknown, its config is missing, or (for slurmrestd)
            slurmctld did not answer within CONTROLLER_WAIT_SECONDS.
    """
    if name not in DAEMONS:
        raise ClusterError(f"unknown Slurm daemon {name!r}; one of {', '.join(DAEMONS)}")
    if not paths.conf.is_file():
        raise ClusterError(f"no {paths.conf}: `retrain-assets up` writes it before the daemons")
    stale = {"munged": paths.munge_socket, "slurmrestd": paths.rest_socket}.get(name)
    if stale is not None:
        stale.unlink(missing_ok=True)
    if name == "slurmrestd":
        deadline = time.monotonic() + CONTROLLER_WAIT_SECONDS
        while not controller_answers(paths):
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"slurmctld did not answer `scontrol ping` within "
                    f"{CONTROLLER_WAIT_SECONDS:.0f} s; see {paths.log('slurmctld')}"
                )
            time.sleep(0.5)
    return command(name, paths)


def main(argv: list[str] | None = None) -> int:
    """Exec the daemon; exit 2 with the reason when it cannot start (the supervisor retries)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(f"usage: python -m {__spec__.name} <cluster folder> <daemon>", file=sys.stderr)
        return 2
    paths = ClusterPaths(Path(args[0]))
    try:
        line = prepare(paths, args[1])
    except ClusterError as error:
        print(f"slurm {args[1]}: {error}", file=sys.stderr, flush=True)
        return 2
    print(f"slurm {args[1]}: exec {' '.join(line)}", flush=True)
    os.execve(line[0], line, cluster_environment(paths))


if __name__ == "__main__":
    sys.exit(main())
