"""`up`'s one-node Slurm cluster: one supervised child per daemon, free ports, refused early."""

from __future__ import annotations

import os
import re
import signal
import socket
from pathlib import Path

import pytest

from retrain_assets.gpu.slurm import cluster, daemon
from retrain_assets.gpu.slurm.cluster_config import ClusterPaths
from retrain_assets.gpu.slurm.rest import SlurmRest
from retrain_assets.runtime import up
from retrain_assets.runtime.slurm_children import slurm_children
from retrain_assets.runtime.supervisor import RestartPolicy, Supervisor
from retrain_assets_tests.support.waiting import wait_until


@pytest.fixture
def slurm_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RETRAIN_TRAINING_BACKEND", "slurm")
    monkeypatch.delenv("RETRAIN_SLURM_URL", raising=False)
    return tmp_path / "home" / "slurm"


def ports_of(conf: Path) -> tuple[int, int]:
    text = conf.read_text()
    controller = re.search(r"^SlurmctldPort=(\d+)$", text, re.M)
    node = re.search(r"^SlurmdPort=(\d+)$", text, re.M)
    assert controller and node, text
    return int(controller.group(1)), int(node.group(1))


def test_each_daemon_is_a_child_the_supervisor_restarts_in_dependency_order(
    slurm_home: Path,
) -> None:
    children = slurm_children()
    by_name = {child.name: child for child in children}
    assert list(by_name) == ["slurm-munged", "slurm-slurmctld", "slurm-slurmd", "slurm-slurmrestd"]
    paths = ClusterPaths(slurm_home)
    assert by_name["slurm-munged"].ready_url == f"unix:{paths.munge_socket}"
    assert by_name["slurm-slurmrestd"].ready_url == f"unix:{paths.rest_socket}"
    assert all(c.after_ready == ("slurm-munged",) for c in children[1:])
    for child in children:  # each execs its daemon through the launcher, SLURM_CONF set
        assert child.argv[1:4] == ("-m", "retrain_assets.gpu.slurm.daemon", str(slurm_home))
        assert child.argv[4] == child.name.removeprefix("slurm-")
    assert paths.conf.is_file() and paths.munge_key.is_file()


def test_the_cluster_listens_on_free_loopback_ports_not_fixed_ones(slurm_home: Path) -> None:
    with socket.socket() as taken:  # whatever else listens is never picked
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        slurm_children()
        controller, node = ports_of(ClusterPaths(slurm_home).conf)
        assert taken.getsockname()[1] not in (controller, node)
    assert controller != node and 20_000 <= min(controller, node) <= max(controller, node) < 30_000
    for port in (controller, node):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # free when picked
    picks = {tuple(cluster.free_loopback_ports(2)) for _ in range(20)}
    assert len(picks) > 1  # random: two platforms preparing at once do not take the same


def test_up_refuses_at_once_with_the_apt_line_when_a_package_is_missing(
    slurm_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cluster, "missing_binaries", lambda: ["slurmrestd"])
    assert up.run_up(demo=False) == 2
    err = capsys.readouterr().err
    assert "needs slurmrestd, not installed: apt-get install -y slurm-wlm slurmrestd munge" in err
    assert not slurm_home.parent.exists()  # refused before Postgres, logs or the cluster's files


def test_the_launcher_refuses_an_unknown_daemon_and_a_cluster_without_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert daemon.main([str(tmp_path), "slurmdbd"]) == 2
    assert "unknown Slurm daemon 'slurmdbd'" in capsys.readouterr().err
    assert daemon.main([str(tmp_path), "slurmctld"]) == 2
    assert f"no {tmp_path / 'slurm.conf'}" in capsys.readouterr().err


@pytest.mark.system
def test_supervised_daemons_take_jobs_and_a_killed_slurmctld_is_restarted_with_a_log_line(
    slurm_home: Path, tmp_path: Path
) -> None:
    supervisor = Supervisor(tmp_path / "logs", RestartPolicy(first_delay=0.5))
    said: list[str] = []
    try:
        for spec in slurm_children():
            supervisor.start(spec, dict(os.environ))
        for child in supervisor.children:
            assert supervisor.wait_ready(child, 90, lambda: False)
        rest = SlurmRest(f"unix://{ClusterPaths(slurm_home).rest_socket}")
        assert rest.ping()  # slurmrestd's socket is there only once slurmctld answered
        controller = next(c for c in supervisor.children if c.spec.name == "slurm-slurmctld")
        killed = controller.process.pid
        os.killpg(killed, signal.SIGKILL)

        def back() -> bool:
            supervisor.keep_running(said.append)
            return controller.process.pid != killed and cluster.controller_answers(
                ClusterPaths(slurm_home)
            )

        wait_until(
            back, 60, "slurmctld restarted by the supervisor", detail=lambda: "\n".join(said)
        )
        assert any("slurm-slurmctld was killed by SIGKILL" in line for line in said), said
        assert any(line.startswith("restarted slurm-slurmctld") for line in said), said
        assert rest.ping()
        rest.close()
    finally:
        supervisor.stop_all(20, lambda: False)
