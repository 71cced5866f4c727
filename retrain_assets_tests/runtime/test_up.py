"""`retrain-assets up` end to end: embedded Postgres, the GPU service, the Dagster processes."""

import contextlib
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil
import psycopg2
import pytest
import requests

from retrain_assets.runtime import environment, up
from retrain_assets.runtime.ports import port_problem
from retrain_assets.store.server import PostgresServer, libpq_url, with_database
from retrain_assets_tests.support.platform import (
    STARTUP_SECONDS,
    STOP_SECONDS,
    UP,
    graphql,
    up_environment,
)
from retrain_assets_tests.support.platform_ledger import LEDGER
from retrain_assets_tests.support.processes import free_port, running
from retrain_assets_tests.support.waiting import wait_for_line, wait_until

GPU_TOKEN = "test-up-gpu-token"


def started_by_up(up: subprocess.Popen, name: str, command: str | None = None) -> psutil.Process:
    """Return the process `up` started from script `name` (run by Python), running `command`."""
    for child in psutil.Process(up.pid).children():
        with contextlib.suppress(psutil.NoSuchProcess):
            argv = child.cmdline()
            at = next((i for i, part in enumerate(argv[:2]) if Path(part).name == name), None)
            if at is not None and (command is None or argv[at + 1 : at + 2] == [command]):
                return child
    pytest.fail(f"`up` started no {name} {command or ''}".rstrip())


def restarted_child(up: subprocess.Popen, name: str, old_pid: int) -> bool:
    """Return whether `up` now runs a live `name` other than the process `old_pid`."""
    for child in psutil.Process(up.pid).children():
        with contextlib.suppress(psutil.NoSuchProcess):
            alive = child.pid != old_pid and child.status() != psutil.STATUS_ZOMBIE
            if alive and any(Path(part).name == name for part in child.cmdline()[:2]):
                return True
    return False


def wait_for_graphql(up: subprocess.Popen, port: int, output: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        assert up.poll() is None, f"up exited with {up.returncode}:\n{output.read_text()}"
        with contextlib.suppress(requests.RequestException):
            if graphql(port, "{ version }")["version"]:
                return
        time.sleep(0.5)
    pytest.fail(f"GraphQL never answered on port {port}:\n{output.read_text()}")


def dagster_tables(server_url: str) -> set[str]:
    conn = psycopg2.connect(libpq_url(with_database(server_url, "retrain_dagster")))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            return {row[0] for row in cur.fetchall()}
    finally:
        conn.close()


@pytest.mark.system
def test_up_serves_dagster_on_postgres_and_stops_cleanly_on_sigterm(tmp_path):
    home, port, gpu_port, mlflow_port = tmp_path / "home", free_port(), free_port(), free_port()
    serve_port, output = free_port(), tmp_path / "up.out"
    env = up_environment(home, port, gpu_port, mlflow_port, serve_port) | {
        "RETRAIN_GPU_TOKEN": GPU_TOKEN
    }
    ledger = LEDGER.started()  # a whole platform: `make test` counts it
    with output.open("wb") as out:
        up = subprocess.Popen(UP, env=env, stdout=out, stderr=subprocess.STDOUT)
    children: list[psutil.Process] = []
    try:
        wait_for_graphql(up, port, output)
        wait_for_line(r"^ready$", output)
        ledger.ready()
        children = psutil.Process(up.pid).children(recursive=True)
        names = " ".join(" ".join(child.cmdline()) for child in children)
        assert "retrain-assets webserver" in names and "dagster-daemon" in names
        assert "gpu-service" in names and "mlflow server" in names

        gpu_url, mlflow_url = f"http://127.0.0.1:{gpu_port}", f"http://127.0.0.1:{mlflow_port}"
        assert wait_for_line(r"^\s+GPU service\s+(\S+)$", output).group(1) == gpu_url
        health = requests.get(f"{gpu_url}/healthz", timeout=10)
        assert health.status_code == 200 and health.json()["status"] == "ok", health.text
        assert requests.get(f"{gpu_url}/jobs/x", timeout=10).status_code == 401
        wrong = {"Authorization": "Bearer dev-token"}
        assert requests.get(f"{gpu_url}/jobs/x", headers=wrong, timeout=10).status_code == 401
        right = {"Authorization": f"Bearer {GPU_TOKEN}"}
        assert requests.get(f"{gpu_url}/jobs/x", headers=right, timeout=10).status_code == 404
        gpu_service = started_by_up(up, "retrain-assets", "gpu-service")
        clients = [("retrain-assets", "webserver"), ("dagster-daemon", None)]
        for name, command in clients:  # the clients of the service
            child_env = started_by_up(up, name, command).environ()
            assert child_env["RETRAIN_GPU_URL"] == gpu_url
            assert child_env["RETRAIN_GPU_TOKEN"] == GPU_TOKEN
            assert child_env["MLFLOW_TRACKING_URI"] == mlflow_url

        serve_url = wait_for_line(r"^\s+Predictions\s+(\S+)$", output).group(1)
        assert serve_url == f"http://127.0.0.1:{serve_port}"
        assert requests.get(f"{serve_url}/v2/health/ready", timeout=10).status_code == 200
        assert requests.get(f"{serve_url}/v2/models/x", timeout=10).status_code == 401
        serve_token = started_by_up(up, "dagster-daemon").environ()["RETRAIN_SERVE_TOKEN"]
        unknown = requests.get(
            f"{serve_url}/v2/models/x",
            headers={"Authorization": f"Bearer {serve_token}"},
            timeout=10,
        )
        assert unknown.status_code == 404, unknown.text  # the children's token is the service's

        assert wait_for_line(r"^\s+MLflow\s+(\S+)$", output).group(1) == mlflow_url
        assert requests.get(f"{mlflow_url}/health", timeout=10).text == "OK"
        experiments = requests.post(
            f"{mlflow_url}/api/2.0/mlflow/experiments/search", json={"max_results": 10}, timeout=10
        )
        assert experiments.status_code == 200, experiments.text  # its Postgres schema exists
        mlflow_server = started_by_up(up, "mlflow")

        info = graphql(port, "{ instance { info } }")["instance"]["info"]
        # dagster.yaml's PooledPostgresStorage: dagster-postgres' run storage, the caching event log
        assert "PostgresRunStorage" in info and "TableCachingEventLogStorage" in info
        server_url = wait_for_line(r"^\s+Postgres\s+(\S+)$", output).group(1)
        assert "host=" in server_url  # the embedded server, on its Unix socket
        assert {"runs", "event_logs", "instance_info"} <= dagster_tables(server_url)
        assert sorted(p.name for p in (home / "landing").iterdir()) == [
            "lindenhof-de",
            "northwind-us",
            "sakura-jp",
        ]

        # a crashed child is restarted, not the end of the platform
        daemon = started_by_up(up, "dagster-daemon")
        daemon.kill()
        crash = r"^retrain-assets up: dagster-daemon was killed by SIGKILL \(crash 1 "
        wait_for_line(crash, output)
        wait_for_line(r"^retrain-assets up: restarted dagster-daemon \(pid \d+\)$", output)
        # the restarted child execs through the default-signals wrapper: wait until its
        # command line is the daemon's again, then it must be a new process
        wait_until(
            lambda: restarted_child(up, "dagster-daemon", daemon.pid),
            30,
            "the restarted dagster-daemon among up's children",
        )
        assert up.poll() is None
        children = psutil.Process(up.pid).children(recursive=True)

        second = subprocess.run(
            UP, env=up_environment(home, free_port()), capture_output=True, text=True, timeout=30
        )
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"another `retrain-assets up` (pid {up.pid})" in second.stderr

        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=STOP_SECONDS) == 0, output.read_text()
        assert running(children) == []
        assert running([gpu_service, mlflow_server]) == []
        assert port_problem("127.0.0.1", port) is None
        assert port_problem("127.0.0.1", gpu_port) is None
        assert port_problem("127.0.0.1", mlflow_port) is None
        assert port_problem("127.0.0.1", serve_port) is None
        assert not (home / "pg" / "postmaster.pid").exists()  # embedded Postgres stopped
    finally:  # after a failure: let `up` stop its children, then kill whatever is left
        if up.poll() is None:
            children += psutil.Process(up.pid).children(recursive=True)
            up.terminate()
            try:
                up.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait()
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        ledger.stopped()


@pytest.mark.system
@pytest.mark.parametrize(
    ("setting", "needed_by"),
    [
        ("RETRAIN_WEBSERVER_PORT", "dagster-webserver"),
        ("RETRAIN_GPU_PORT", "gpu-service"),
        ("RETRAIN_MLFLOW_PORT", "mlflow"),
        ("RETRAIN_SERVE_PORT", "prediction-service"),
    ],
)
def test_up_refuses_a_taken_port_before_starting_anything(tmp_path, setting, needed_by):
    home = tmp_path / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = up_environment(home, free_port(), free_port()) | {setting: str(port)}
        result = subprocess.run(UP, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"port {port} on 127.0.0.1 is in use (needed by {needed_by}" in result.stderr
    assert f"set {setting} or stop the other process" in result.stderr
    assert result.stderr.count("is in use") == 1  # the other port was free
    assert not home.exists()  # no Postgres, no DAGSTER_HOME, no logs: refused before anything


def test_up_refuses_a_bad_setting_before_starting_anything(tmp_path):
    home = tmp_path / "home"
    bad = {"RETRAIN_POLL_INTERVAL_SECONDS": "0"}
    env = up_environment(home, free_port(), free_port()) | bad
    result = subprocess.run(UP, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    refusal = "retrain-assets up: RETRAIN_POLL_INTERVAL_SECONDS=0: must be a whole number >= 1"
    assert refusal in result.stderr.splitlines()
    assert result.stdout == ""  # not one "starting ..." line
    assert not home.exists()  # no Postgres folder, no DAGSTER_HOME, no logs, no token files
    children = [
        process.pid
        for process in psutil.process_iter(["cmdline"])
        if str(home) in " ".join(process.info["cmdline"] or [])
    ]
    assert children == []  # no process of this RETRAIN_HOME was left behind


BACKEND = "postgresql+psycopg2://postgres:@/retrain_mlflow?host=/tmp/pg"


def test_up_runs_the_gpu_service_first_with_its_settings(monkeypatch, tmp_path):
    for name in ("RETRAIN_GPU_URL", "RETRAIN_GPU_SLOTS", "RETRAIN_GPU_ALLOW_FAULTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("RETRAIN_GPU_PORT", "18765")
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    assert [need.setting for need in up.needed_ports()] == [
        "RETRAIN_WEBSERVER_PORT",
        "RETRAIN_GPU_PORT",
        "RETRAIN_MLFLOW_PORT",
        "RETRAIN_SERVE_PORT",
    ]
    first, *rest = up.platform_children(
        tmp_path / "code.sock", tmp_path / "workspace.yaml", BACKEND
    )
    assert [spec.name for spec in rest] == [
        "mlflow",
        "prediction-service",
        "code-server",
        "dagster-webserver",
        "dagster-daemon",
    ]
    assert first.name == "gpu-service"
    assert first.argv[0].endswith("/retrain-assets")
    assert " ".join(first.argv[1:]) == "gpu-service --host 127.0.0.1 --port 18765 --slots 2"
    assert first.ready_url == "http://127.0.0.1:18765/healthz"

    monkeypatch.setenv("RETRAIN_GPU_SLOTS", "3")
    monkeypatch.setenv("RETRAIN_GPU_ALLOW_FAULTS", "true")
    assert up.platform_children(tmp_path / "code.sock", tmp_path / "workspace.yaml", BACKEND)[
        0
    ].argv[-3:] == (
        "--slots",
        "3",
        "--allow-faults",
    )


def test_up_leaves_a_remote_gpu_service_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("RETRAIN_GPU_URL", "https://gpu.example.com")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://mlflow.example.com")
    assert [need.name for need in up.needed_ports()] == ["dagster-webserver", "prediction-service"]
    children = up.platform_children(tmp_path / "code.sock", tmp_path / "workspace.yaml", BACKEND)
    assert [spec.name for spec in children] == [
        "prediction-service",
        "code-server",
        "dagster-webserver",
        "dagster-daemon",
    ]


def test_up_runs_a_one_node_slurm_cluster_instead_of_the_gpu_service(monkeypatch, tmp_path):
    monkeypatch.delenv("RETRAIN_GPU_URL", raising=False)
    monkeypatch.delenv("RETRAIN_SLURM_URL", raising=False)
    monkeypatch.setenv("RETRAIN_TRAINING_BACKEND", "slurm")
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://mlflow.example.com")
    assert [need.name for need in up.needed_ports()] == ["dagster-webserver", "prediction-service"]
    children = up.platform_children(tmp_path / "code.sock", tmp_path / "workspace.yaml", BACKEND)
    names = [spec.name for spec in children]
    assert names[:4] == ["slurm-munged", "slurm-slurmctld", "slurm-slurmd", "slurm-slurmrestd"]
    assert "gpu-service" not in names
    monkeypatch.setenv("RETRAIN_SLURM_URL", "https://slurmrestd.example.org:6820")  # a team's
    children = up.platform_children(tmp_path / "code.sock", tmp_path / "workspace.yaml", BACKEND)
    assert children[0].name == "prediction-service"
    monkeypatch.setenv("RETRAIN_TRAINING_BACKEND", "kubernetes")
    with pytest.raises(ValueError, match="RETRAIN_TRAINING_BACKEND=kubernetes: must be one of"):
        up.platform_children(tmp_path / "code.sock", tmp_path / "workspace.yaml", BACKEND)


def test_up_runs_mlflow_on_postgres_with_served_artifacts(monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("RETRAIN_GPU_URL", "https://gpu.example.com")
    monkeypatch.setenv("RETRAIN_MLFLOW_PORT", "15000")
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    spec = up.platform_children(tmp_path / "code.sock", tmp_path / "workspace.yaml", BACKEND)[0]
    assert spec.name == "mlflow" and spec.argv[0].endswith("/mlflow")
    artifacts = tmp_path / "home" / "mlflow-artifacts"
    assert " ".join(spec.argv[1:]) == (
        f"server --host 127.0.0.1 --port 15000 --backend-store-uri {BACKEND} "
        f"--artifacts-destination {artifacts} --serve-artifacts --workers 1"
    )
    assert spec.ready_url == "http://127.0.0.1:15000/health"
    assert artifacts.is_dir()

    monkeypatch.setenv("RETRAIN_MLFLOW_ARTIFACTS_URL", "s3://models-bucket/mlflow")
    spec = up.platform_children(tmp_path / "code.sock", tmp_path / "workspace.yaml", BACKEND)[0]
    assert "--artifacts-destination s3://models-bucket/mlflow" in " ".join(spec.argv)


def test_children_reach_mlflow_at_the_tracking_uri(monkeypatch, tmp_path):
    folders = environment.DagsterFolders(tmp_path, tmp_path, tmp_path)
    server = PostgresServer(
        url="postgresql+psycopg2://postgres:@/postgres?host=/tmp/pg", embedded=True
    )
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("RETRAIN_MLFLOW_PORT", "15000")
    env = environment.child_environment(server, folders)
    assert env["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:15000"
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"  # no huey consumer processes

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://mlflow.example.com")
    env = environment.child_environment(server, folders)
    assert env["MLFLOW_TRACKING_URI"] == "https://mlflow.example.com"


def test_children_share_a_random_gpu_token_unless_one_is_set(monkeypatch):
    monkeypatch.delenv("RETRAIN_GPU_URL", raising=False)
    monkeypatch.delenv("RETRAIN_GPU_TOKEN", raising=False)
    first, second = environment.children_gpu_token(), environment.children_gpu_token()
    assert first != second and len(first) >= 32 and "dev-token" not in (first, second)

    monkeypatch.setenv("RETRAIN_GPU_TOKEN", "chosen")
    assert environment.children_gpu_token() == "chosen"

    monkeypatch.delenv("RETRAIN_GPU_TOKEN")
    monkeypatch.setenv("RETRAIN_GPU_URL", "https://gpu.example.com")
    assert environment.children_gpu_token() == "dev-token"  # a remote service cannot know ours


def test_up_runs_the_prediction_service_with_a_shared_token(monkeypatch, tmp_path):
    monkeypatch.setenv("RETRAIN_GPU_URL", "https://gpu.example.com")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://mlflow.example.com")
    monkeypatch.setenv("RETRAIN_SERVE_PORT", "18080")
    monkeypatch.delenv("RETRAIN_SERVE_TOKEN", raising=False)
    (spec, *_) = up.platform_children(tmp_path / "code.sock", tmp_path / "workspace.yaml", BACKEND)
    assert spec.name == "prediction-service" and spec.argv[0].endswith("/retrain-assets")
    assert " ".join(spec.argv[1:]) == "serve --host 127.0.0.1 --port 18080"
    assert spec.ready_url == "http://127.0.0.1:18080/v2/health/ready"

    folders = environment.DagsterFolders(tmp_path, tmp_path, tmp_path)
    server = PostgresServer(
        url="postgresql+psycopg2://postgres:@/postgres?host=/tmp/pg", embedded=True
    )
    env = environment.child_environment(server, folders)
    assert env["RETRAIN_SERVE_URL"] == "http://127.0.0.1:18080"
    assert len(env["RETRAIN_SERVE_TOKEN"]) >= 32  # random: never the dev token under `up`
    assert (
        environment.child_environment(server, folders)["RETRAIN_SERVE_TOKEN"]
        != env["RETRAIN_SERVE_TOKEN"]
    )
    monkeypatch.setenv("RETRAIN_SERVE_TOKEN", "chosen")
    assert environment.child_environment(server, folders)["RETRAIN_SERVE_TOKEN"] == "chosen"


def test_the_ready_timeout_is_configurable_and_checked(monkeypatch):
    from retrain_assets.settings import ready_timeout_seconds

    monkeypatch.delenv("RETRAIN_READY_TIMEOUT_SECONDS", raising=False)
    assert ready_timeout_seconds() == 120.0
    monkeypatch.setenv("RETRAIN_READY_TIMEOUT_SECONDS", "480")
    assert ready_timeout_seconds() == 480.0
    for bad in ("0", "-5", "soon"):
        monkeypatch.setenv("RETRAIN_READY_TIMEOUT_SECONDS", bad)
        with pytest.raises(ValueError, match=f"RETRAIN_READY_TIMEOUT_SECONDS={bad}: must be"):
            ready_timeout_seconds()
