"""`$RETRAIN_HOME/platform.json`: written owner-only, read back, and what commands take from it."""

from __future__ import annotations

import http.server
import os
import stat
import sys
import threading
from collections.abc import Iterator

import pytest

from retrain_assets.runtime.backend_health import gpu_service_line, slurm_node_lines
from retrain_assets.runtime.platform_env import apply_running_platform
from retrain_assets.runtime.platform_file import (
    PlatformFileError,
    PlatformRecord,
    RecordedProcess,
    platform_file,
    read_platform_file,
    write_platform_file,
)
from retrain_assets_tests.support.processes import free_port

ENDPOINTS = {
    "mlflow_uri": "http://127.0.0.1:5123",
    "gpu_url": "http://127.0.0.1:8123",
    "serve_url": "http://127.0.0.1:8124",
    "webserver_port": "3123",
    "postgres_url": "postgresql://postgres:@/postgres?host=/tmp/pg",
    "training_backend": "reference",
}


def record(up: RecordedProcess) -> PlatformRecord:
    child = RecordedProcess.of("steady", os.getpid())
    return PlatformRecord(up=up, ready=True, processes=(child,), endpoints=ENDPOINTS)


def test_the_record_is_owner_only_and_reads_back(tmp_path):
    written = record(RecordedProcess.of("up", os.getpid()))
    path = write_platform_file(tmp_path, written)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_platform_file(tmp_path) == written
    assert [p.name for p in tmp_path.iterdir()] == ["platform.json"]  # no temporary left
    assert read_platform_file(tmp_path / "elsewhere") is None


def test_a_broken_record_names_the_file_and_the_field(tmp_path):
    platform_file(tmp_path).write_text('{"version": 1, "ready": true}')
    with pytest.raises(PlatformFileError, match=r"platform\.json is not a platform record "):
        read_platform_file(tmp_path)
    with pytest.raises(PlatformFileError, match="missing field 'up'"):
        read_platform_file(tmp_path)


def test_a_command_takes_the_endpoints_the_environment_does_not_set(tmp_path):
    write_platform_file(tmp_path, record(RecordedProcess.of("up", os.getpid())))
    env = {"MLFLOW_TRACKING_URI": "http://chosen:1", "RETRAIN_SERVE_PORT": "9999"}
    notes: list[str] = []
    found = apply_running_platform(tmp_path, notes.append, env)
    assert found is not None and notes == []
    assert env["MLFLOW_TRACKING_URI"] == "http://chosen:1"  # set explicitly: it wins
    assert "RETRAIN_SERVE_URL" not in env  # RETRAIN_SERVE_PORT decides that endpoint
    assert env["RETRAIN_GPU_URL"] == "http://127.0.0.1:8123"
    assert env["RETRAIN_WEBSERVER_PORT"] == "3123"
    assert env["RETRAIN_PG_URL"] == ENDPOINTS["postgres_url"]
    assert env["RETRAIN_TRAINING_BACKEND"] == "reference"


def test_a_record_whose_up_is_dead_is_ignored_with_a_note(tmp_path):
    me = RecordedProcess.of("up", os.getpid())
    dead = RecordedProcess("up", me.pid, me.started - 1000)  # the pid is another process now
    write_platform_file(tmp_path, record(dead))
    env: dict[str, str] = {}
    notes: list[str] = []
    assert apply_running_platform(tmp_path, notes.append, env) is None
    assert env == {}
    assert len(notes) == 1 and f"its `up` (pid {me.pid}) is not running" in notes[0]


@pytest.fixture
def health_server() -> Iterator[str]:
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/healthz" else 404)
            self.end_headers()
            self.wfile.write(b'{"status": "ok"}')

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_status_says_whether_the_gpu_service_answers_its_health_endpoint(health_server):
    assert gpu_service_line(health_server) == (
        f"training backend: GPU service reachable at {health_server} (healthy)"
    )
    closed = f"http://127.0.0.1:{free_port()}"
    assert gpu_service_line(closed).startswith(
        f"training backend: GPU service UNREACHABLE at {closed}/healthz (ConnectionError)"
    )


def test_status_names_a_drained_slurm_node_and_its_reason(tmp_path, monkeypatch):
    sinfo = tmp_path / "sinfo"
    sinfo.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "assert sys.argv[1:] == ['--noheader', '--Node', '--format=%N|%T|%E'], sys.argv\n"
        "print('node1|drained|disk full ' + os.environ.get('SLURM_CONF', '-'))\n"
        "print('node2|idle|none')\n"
    )
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_CONF", "/x/slurm.conf")
    assert slurm_node_lines() == [
        "training backend: Slurm node node1 DRAINED, reason: disk full /x/slurm.conf",
        "training backend: Slurm node node2 idle",
    ]
