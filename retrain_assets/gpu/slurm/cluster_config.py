"""The files of a one-node Slurm cluster on loopback: slurm.conf, the munge key, the folders.

Everything lives under one folder of our own (never /etc/slurm or /etc/munge), so a test or
`retrain-assets slurm` can start a cluster beside anything else on the machine. The config is
the one found to work with Debian's Slurm 22.05 as root: linuxproc process
tracking, no task plugin, no accounting, cons_tres selection, one partition.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

PARTITION = "retrain"
MUNGE_KEY_BYTES = 1024
SLURMD_TIMEOUT_SECONDS = 10  # a silent slurmd's node goes DOWN after this
CRED_EXPIRE_SECONDS = 20  # a requeued job waits this (+1 s) before it may start again
BACKFILL_INTERVAL_SECONDS = 5  # then backfill starts it (no event wakes the scheduler)


@dataclass(frozen=True)
class ClusterPaths:
    """Where one cluster keeps its config, state, sockets and logs."""

    root: Path

    @property
    def conf(self) -> Path:
        """The slurm.conf every Slurm command and daemon reads (through SLURM_CONF)."""
        return self.root / "slurm.conf"

    @property
    def munge_dir(self) -> Path:
        """Where munged keeps its key, socket, pid, seed and log (the folder must be 755)."""
        return self.root / "munge"

    @property
    def munge_socket(self) -> Path:
        """The socket munged listens on and Slurm's AuthInfo points at."""
        return self.munge_dir / "munge.socket"

    @property
    def munge_key(self) -> Path:
        """The cluster's own munge key (never /etc/munge/munge.key)."""
        return self.munge_dir / "munge.key"

    @property
    def rest_socket(self) -> Path:
        """The unix socket slurmrestd listens on (rest_auth/local)."""
        return self.root / "slurmrestd.socket"

    @property
    def state_dir(self) -> Path:
        """The StateSaveLocation of slurmctld."""
        return self.root / "state"

    @property
    def spool_dir(self) -> Path:
        """The SlurmdSpoolDir of slurmd."""
        return self.root / "spool"

    @property
    def log_dir(self) -> Path:
        """The daemons' log files."""
        return self.root / "log"

    def log(self, name: str) -> Path:
        """Return the log file of one daemon."""
        return self.log_dir / f"{name}.log"


@dataclass(frozen=True)
class ClusterPorts:
    """slurmctld's and slurmd's TCP ports on 127.0.0.1."""

    controller: int = 6817
    node: int = 6818


def render_slurm_conf(
    paths: ClusterPaths,
    ports: ClusterPorts,
    *,
    host: str,
    cpus: int,
    memory_mb: int = 1000,
    max_jobs: int = 50_000,
) -> str:
    """Return slurm.conf for a one-node cluster whose every address is 127.0.0.1.

    `MaxJobCount` counts finished jobs until `MinJobAge` too: 50,000 leaves room for 10,000
    held jobs in a benchmark. `SlurmdTimeout` is short so a dead slurmd's node goes DOWN and
    its jobs are requeued about 25 s after it died, as on a real cluster with a dead node (slurmd
    answers the controller's pings every few seconds on loopback, so 10 s is not a false
    alarm). A requeued job may start again only after `cred_expire` + 1 s: 20 s instead of
    Slurm's 120, still ample for a batch launch's credential on loopback. No event schedules
    it then: the next backfill pass does, every 5 s instead of 30 (the poller benchmark's
    status call at 10,000 held jobs measured no slower: 2.27 s against 2.58 s with 30).
    """
    lines = [
        "ClusterName=retrain",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ports.controller}",
        f"SlurmdPort={ports.node}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={paths.munge_socket},cred_expire={CRED_EXPIRE_SECONDS}",
        f"StateSaveLocation={paths.state_dir}",
        f"SlurmdSpoolDir={paths.spool_dir}",
        f"SlurmctldPidFile={paths.root / 'slurmctld.pid'}",
        f"SlurmdPidFile={paths.root / 'slurmd.pid'}",
        f"SlurmctldLogFile={paths.log('slurmctld')}",
        f"SlurmdLogFile={paths.log('slurmd')}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        f"SchedulerParameters=bf_interval={BACKFILL_INTERVAL_SECONDS}",
        "MpiDefault=none",
        "ReturnToService=2",
        f"MaxJobCount={max_jobs}",
        "MinJobAge=300",
        f"SlurmdTimeout={SLURMD_TIMEOUT_SECONDS}",
        "InactiveLimit=0",
        "KillWait=5",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def write_cluster_files(paths: ClusterPaths, ports: ClusterPorts) -> None:
    """Create the folders, a munge key (kept when present) and slurm.conf under `paths.root`.

    munged refuses a socket folder others cannot enter and a key others can read: the folder
    is 755, the key 400.
    """
    for folder in (paths.root, paths.state_dir, paths.spool_dir, paths.log_dir, paths.munge_dir):
        folder.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.munge_dir, 0o755)
    if not paths.munge_key.is_file():
        paths.munge_key.write_bytes(secrets.token_bytes(MUNGE_KEY_BYTES))
    os.chmod(paths.munge_key, 0o400)
    conf = render_slurm_conf(
        paths, ports, host=socket.gethostname().split(".")[0], cpus=os.cpu_count() or 1
    )
    paths.conf.write_text(conf)
