"""`up`'s one-node Slurm cluster: one supervised child per daemon, free ports, refused early."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from retrain_assets.gpu.slurm import cluster, daemon
from retrain_assets.gpu.slurm.cluster_config import ClusterPaths
from retrain_assets.runtime import up
from retrain_assets.runtime.slurm_children import slurm_children


@pytest.fixture
def slurm_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RETRAIN_TRAINING_BACKEND", "slurm")
    monkeypatch.delenv("RETRAIN_SLURM_URL", raising=False)
    return tmp_path / "home" / "slurm"


def ports_of(conf: Path) -> tuple[int, int]:
    text = conf.read_text()
    found = [
        int(re.search(rf"^{key}=(\d+)$", text, re.M).group(1))
        for key in ("SlurmctldPort", "SlurmdPort")
    ]  # type: ignore[union-attr]
    return found[0], found[1]


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
