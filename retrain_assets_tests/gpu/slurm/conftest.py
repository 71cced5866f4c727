"""The real one-node Slurm cluster the Slurm tests share: started once, on free loopback ports."""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrain_assets.gpu.slurm import states
from retrain_assets.gpu.slurm.backend import SlurmBackend, SlurmJobOptions
from retrain_assets.gpu.slurm.cluster import SlurmCluster, start_cluster
from retrain_assets.gpu.slurm.cluster_config import PARTITION, ClusterPorts
from retrain_assets.gpu.slurm.rest import SlurmRest
from retrain_assets_tests.support.processes import free_port


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """munged, slurmctld, slurmd and slurmrestd under a temp folder (`make test` installs them)."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("slurm"), ClusterPorts(controller=free_port(), node=free_port())
    )
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[SlurmBackend]:
    """A backend on the session's cluster whose shared storage is this test's own folder."""
    options = SlurmJobOptions(partition=PARTITION, time_limit_minutes=5)
    backend = SlurmBackend(SlurmRest(slurm_cluster.rest_url), tmp_path / "jobs", options)
    try:
        yield backend
    finally:
        leave_cluster_sound(backend.rest, slurm_cluster)
        backend.close()


def leave_cluster_sound(rest: SlurmRest, cluster: SlurmCluster) -> None:
    """Cancel the jobs a test left and resume a drained node, so one failure does not cascade.

    A crash test that fails half-way can leave a held job and the only node DRAINED ("Duplicate
    jobid"); every later test on the shared cluster would then wait in the queue until its deadline.
    """
    for job in rest.jobs():
        if not states.finished(job):
            rest.cancel(int(job["job_id"]))
    for node in rest.nodes():
        if "DRAIN" in set(node.get("state_flags") or []):
            subprocess.run(
                ["scontrol", "update", f"nodename={node['name']}", "state=resume"],
                env=cluster.env(),
                capture_output=True,
                timeout=30,
                check=True,
            )
