"""A one-node Slurm cluster on loopback: munged, slurmctld, slurmd and slurmrestd.

`retrain-assets up` supervises the four daemons as children of its own (`supervised_daemons`:
each restarted with backoff when it dies, through the `daemon` launcher); `retrain-assets
slurm` and the tests' session fixture start them here (`start_cluster`). Every process gets
SLURM_CONF (without it a Slurm binary asks DNS for its configuration, off loopback), runs in the
foreground in its own process group, and logs under the cluster's folder. slurmrestd listens
on a unix socket with `rest_auth/local`; as root it needs SLURMRESTD_SECURITY=disable_user_check.
Started by `retrain-assets slurm` (`die_with_parent`), each daemon gets SIGTERM when that
command dies, even of SIGKILL: in sessions of their own, the daemons are out of reach of its
group's signals.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from retrain_assets.gpu.slurm.cluster_config import (
    ClusterPaths,
    ClusterPorts,
    write_cluster_files,
)
from retrain_assets.parent_death import launcher

DAEMONS = ("munged", "slurmctld", "slurmd", "slurmrestd")
OPENAPI_PLUGIN = "openapi/v0.0.38"
APT_PACKAGES = "slurm-wlm slurmrestd munge"


class ClusterError(Exception):
    """The cluster could not be started: which daemon, and the end of its log."""


def cluster_environment(paths: ClusterPaths) -> dict[str, str]:
    """Return the environment every Slurm command and daemon of this cluster needs."""
    env = dict(os.environ)
    env["SLURM_CONF"] = str(paths.conf)
    env["SLURMRESTD_SECURITY"] = "disable_user_check"
    return env


def missing_binaries() -> list[str]:
    """Return the daemons not installed (`apt-get install -y slurm-wlm slurmrestd munge`)."""
    return [name for name in DAEMONS if shutil.which(name, path=_sbin_path()) is None]


def refusal() -> str | None:
    """Return why this machine cannot run the one-node cluster (with the fix), None if it can.

    Checked by `up` before anything starts: a missing package used to surface as the cluster's
    child dying after "ready" had been printed.
    """
    missing = missing_binaries()
    if missing:
        return (
            f"the one-node Slurm cluster needs {', '.join(missing)}, not installed: "
            f"apt-get install -y {APT_PACKAGES}"
        )
    if os.geteuid() != 0:
        return (
            "the one-node Slurm cluster runs its daemons as root (SlurmUser=root): run `up` as "
            "root, or point RETRAIN_SLURM_URL at a cluster"
        )
    return None


def free_loopback_ports(count: int, low: int = 20_000, high: int = 30_000) -> list[int]:
    """Return `count` distinct ports nothing listens on at 127.0.0.1, picked at random.

    Below Linux's ephemeral range (32768+), so a client's outgoing connection cannot take
    one; random, so two platforms preparing at the same moment hardly ever pick the same.
    """
    picked: list[int] = []
    for port in random.sample(range(low, high), k=min(high - low, 200)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        picked.append(port)
        if len(picked) == count:
            return picked
    raise ClusterError(f"no {count} free loopback ports in {low}-{high - 1}")


@dataclass(frozen=True)
class DaemonLaunch:
    """One daemon as `up` supervises it.

    Its command, the socket that says it is ready, and the daemons ready before it starts.
    """

    name: str
    argv: tuple[str, ...]
    ready_socket: Path | None = None
    after: tuple[str, ...] = ()


def supervised_daemons(root: Path, python: str) -> list[DaemonLaunch]:
    """Write the cluster's files on free loopback ports and return its daemons in start order.

    Each is `python -m retrain_assets.gpu.slurm.daemon <root> <name>`, which sets SLURM_CONF
    and execs the daemon. munged's and slurmrestd's sockets say they are ready; slurmrestd's
    launcher waits for slurmctld first, so its socket means the cluster takes jobs.
    """
    paths = ClusterPaths(root)
    controller, node = free_loopback_ports(2)
    write_cluster_files(paths, ClusterPorts(controller=controller, node=node))

    def launch(name: str) -> tuple[str, ...]:
        return (python, "-m", "retrain_assets.gpu.slurm.daemon", str(root), name)

    return [
        DaemonLaunch("munged", launch("munged"), paths.munge_socket),
        DaemonLaunch("slurmctld", launch("slurmctld"), after=("munged",)),
        DaemonLaunch("slurmd", launch("slurmd"), after=("munged",)),
        DaemonLaunch("slurmrestd", launch("slurmrestd"), paths.rest_socket, after=("munged",)),
    ]


def controller_answers(paths: ClusterPaths) -> bool:
    """Return True when slurmctld answers `scontrol ping` (SLURM_CONF set)."""
    done = subprocess.run(
        ["scontrol", "ping"],
        env=cluster_environment(paths),
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.returncode == 0 and " is UP" in done.stdout


def _sbin_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def _binary(name: str) -> str:
    found = shutil.which(name, path=_sbin_path())
    if found is None:
        raise ClusterError(f"{name} is not installed: apt-get install -y {APT_PACKAGES}")
    return found


@dataclass
class SlurmCluster:
    """A running cluster: its folders and its daemons, stopped in reverse order by `stop`."""

    paths: ClusterPaths
    ports: ClusterPorts
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    die_with_parent: bool = False

    @property
    def rest_url(self) -> str:
        """Where slurmrestd answers: `unix://<socket>`."""
        return f"unix://{self.paths.rest_socket}"

    def env(self) -> dict[str, str]:
        """Return the environment for Slurm commands against this cluster (SLURM_CONF set)."""
        return cluster_environment(self.paths)

    def start_daemon(self, name: str) -> None:
        """Start one daemon (again, after a test killed it) and wait until it answers.

        A socket a killed daemon left behind is removed first: it would refuse the new one's
        bind, and would look like an answer.
        """
        sockets = {"munged": self.paths.munge_socket, "slurmrestd": self.paths.rest_socket}
        if name in sockets:
            sockets[name].unlink(missing_ok=True)
        log = self.paths.log(f"{name}.out").open("ab")
        line = command(name, self.paths)
        if self.die_with_parent:  # start_daemon runs in the main thread of `retrain-assets slurm`
            line = launcher(line)
        self.processes[name] = subprocess.Popen(
            line,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        _wait_ready(self, name)

    def kill_daemon(self, name: str) -> None:
        """SIGKILL one daemon (a fault test's crash) and reap it."""
        process = self.processes.pop(name)
        _kill_group(process, signal.SIGKILL)

    def stop(self) -> None:
        """Stop the daemons, the REST daemon first and munged last."""
        for name in reversed(DAEMONS):
            process = self.processes.pop(name, None)
            if process is not None:
                _kill_group(process, signal.SIGTERM)


def start_cluster(
    root: Path, ports: ClusterPorts | None = None, die_with_parent: bool = False
) -> SlurmCluster:
    """Write the cluster's files under `root` and start its four daemons, each until it answers.

    With `die_with_parent` the daemons get SIGTERM when this process dies (call it from the
    main thread: the signal follows the thread that started them).

    Raises:
        ClusterError: a binary is missing, or a daemon exited or did not answer in time.
    """
    paths = ClusterPaths(root)
    write_cluster_files(paths, ports or ClusterPorts())
    cluster = SlurmCluster(paths, ports or ClusterPorts(), die_with_parent=die_with_parent)
    try:
        for name in DAEMONS:
            cluster.start_daemon(name)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def command(name: str, paths: ClusterPaths) -> list[str]:
    """Return the daemon's command line (in the foreground, its paths from `paths`)."""
    if name == "munged":
        munge = paths.munge_dir
        return [
            _binary("munged"),
            "--foreground",
            "--force",
            f"--socket={paths.munge_socket}",
            f"--key-file={paths.munge_key}",
            f"--pid-file={munge / 'munged.pid'}",
            f"--seed-file={munge / 'munged.seed'}",
            f"--log-file={paths.log('munged')}",
        ]
    if name == "slurmctld":
        return [_binary("slurmctld"), "-D", "-i"]
    if name == "slurmd":
        return [_binary("slurmd"), "-D"]
    if name == "slurmrestd":
        return [
            _binary("slurmrestd"),
            "-a",
            "rest_auth/local",
            "-s",
            OPENAPI_PLUGIN,
            f"unix:{paths.rest_socket}",
        ]
    raise ValueError(f"unknown Slurm daemon {name!r}; one of {DAEMONS}")


def _wait_ready(cluster: SlurmCluster, name: str, timeout: float = 60.0) -> None:
    """Poll until the daemon answers; raise with its log's tail when it exits or never does."""
    deadline = time.monotonic() + timeout
    process = cluster.processes[name]
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ClusterError(
                f"{name} exited with {process.returncode}:\n{_tail(cluster.paths, name)}"
            )
        if _answers(cluster, name):
            return
        time.sleep(0.2)
    raise ClusterError(
        f"{name} did not answer within {timeout:.0f} s:\n{_tail(cluster.paths, name)}"
    )


def _answers(cluster: SlurmCluster, name: str) -> bool:
    paths = cluster.paths
    if name == "munged":
        return paths.munge_socket.exists()
    if name == "slurmrestd":
        return paths.rest_socket.exists()
    if name == "slurmctld":
        return controller_answers(paths)
    sinfo = ["sinfo", "--noheader", "--format=%T"]
    done = subprocess.run(sinfo, env=cluster.env(), capture_output=True, text=True, timeout=30)
    return done.returncode == 0 and done.stdout.strip() in {"idle", "mixed", "allocated"}


def _tail(paths: ClusterPaths, name: str, lines: int = 20) -> str:
    text = ""
    for log in (paths.log(name), paths.log(f"{name}.out")):
        if log.is_file():
            text += "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) + "\n"
    return text or "(no log)"


def _kill_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group has already gone
        os.killpg(process.pid, sig)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)
