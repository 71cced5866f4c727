"""The one-node Slurm cluster as `up`'s children: one supervised child per daemon.

With RETRAIN_TRAINING_BACKEND=slurm and no RETRAIN_SLURM_URL, `up` runs munged, slurmctld,
slurmd and slurmrestd itself, each a `ChildSpec` the supervisor restarts with backoff (and a
log line) when it dies, like the webserver or MLflow. What the daemons need is in
`gpu/slurm/cluster.py`; this module only turns it into children, and refuses before anything
starts when the machine cannot run them.
"""

from __future__ import annotations

import sys

from retrain_assets.gpu.slurm.cluster import refusal, supervised_daemons
from retrain_assets.runtime.supervisor import UNIX_SCHEME, ChildSpec
from retrain_assets.settings import slurm_home

PREFIX = "slurm-"


def slurm_refusal() -> str | None:
    """Return why `up` cannot run the one-node cluster here (packages, root), None if it can."""
    return refusal()


def slurm_children() -> list[ChildSpec]:
    """Return the cluster's daemons as children, in start order, its files written first.

    The files (slurm.conf on free loopback ports, the munge key) go to $RETRAIN_HOME/slurm.
    """
    return [
        ChildSpec(
            name=PREFIX + daemon.name,
            argv=daemon.argv,
            ready_url=f"{UNIX_SCHEME}{daemon.ready_socket}" if daemon.ready_socket else None,
            after_ready=tuple(PREFIX + name for name in daemon.after),
        )
        for daemon in supervised_daemons(slurm_home(), sys.executable)
    ]
