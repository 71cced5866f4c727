"""HttpGpuService against a tiny stand-in HTTP server: paging, errors, retries, hash checks."""

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from retrain_assets.gpu.client import GpuServiceError, HttpGpuService
from retrain_assets.gpu.protocol import ArtifactCorrupt, JobConflict, JobStatus
from retrain_assets_tests.support.processes import free_port

Reply = tuple[int, Any]  # status and a JSON body, or bytes sent as they are


def job_json(job_id: str, status: str = "queued") -> dict[str, Any]:
    return {
        "id": job_id,
        "idempotency_key": f"key-{job_id}",
        "status": status,
        "attempt": 1,
        "rounds_done": 0,
        "total_rounds": 10,
        "last_checkpoint_round": None,
        "error": None,
        "worker_pid": None,  # extras the protocol does not carry are ignored
    }


class Stub:
    """Routes `METHOD path` to a function of the request body; records every request."""

    def __init__(self) -> None:
        self.routes: dict[str, Callable[[Any], Reply]] = {}
        self.requests: list[tuple[str, Any, str | None]] = []
        self.drop_next = 0  # close this many connections without answering


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            state.requests.append(
                (f"{self.command} {self.path}", body, self.headers["Authorization"])
            )
            if state.drop_next:
                state.drop_next -= 1
                self.close_connection = True
                return
            route = state.routes.get(f"{self.command} {self.path}")
            status, reply = route(body) if route else (404, {"detail": "no route"})
            data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _handle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_statuses_asks_500_ids_at_a_time(stub: tuple[Stub, str]) -> None:
    state, url = stub
    state.routes["POST /jobs/status"] = lambda body: (
        200,
        {"jobs": [job_json(i) for i in body["ids"] if i != "gone"], "missing": []},
    )
    ids = [f"j{n}" for n in range(1200)] + ["gone"]
    found = HttpGpuService(url, "t").statuses(ids)
    assert set(found) == set(ids) - {"gone"}
    assert [len(body["ids"]) for _, body, _ in state.requests] == [500, 500, 201]
    assert all(auth == "Bearer t" for _, _, auth in state.requests)


def test_submit_conflict_and_other_errors(stub: tuple[Stub, str]) -> None:
    state, url = stub
    client = HttpGpuService(url, "t")
    state.routes["POST /jobs"] = lambda body: (409, {"detail": "idempotency key 'k' is taken"})
    with pytest.raises(JobConflict, match="'k' is taken"):
        client.submit("k", {"customer": "c"})
    state.routes["POST /jobs"] = lambda body: (500, {"detail": "boom"})
    with pytest.raises(GpuServiceError, match="boom") as error:
        client.submit("k", {"customer": "c"})
    assert error.value.status == 500
    state.routes["POST /jobs"] = lambda body: (201, job_json("new"))
    assert client.submit("k", {"customer": "c"}).status == JobStatus.QUEUED
    assert state.requests[-1][1] == {"idempotency_key": "k", "spec": {"customer": "c"}}


def test_a_dropped_connection_is_retried_and_a_dead_service_is_a_clear_error(
    stub: tuple[Stub, str],
) -> None:
    state, url = stub
    state.routes["GET /jobs/a"] = lambda body: (200, job_json("a", "running"))
    state.drop_next = 2
    assert HttpGpuService(url, "t", retry_delay=0.01).get("a").status == JobStatus.RUNNING
    assert len(state.requests) == 3
    dead = HttpGpuService(f"http://127.0.0.1:{free_port()}", "t", retry_delay=0.01)
    with pytest.raises(GpuServiceError, match="GET /jobs/a -> None") as error:
        dead.get("a")
    assert error.value.status is None
    assert HttpGpuService(url, "t").find("unknown") is None


def test_download_keeps_verified_bytes_and_refuses_tampered_ones(
    stub: tuple[Stub, str], tmp_path: Path
) -> None:
    state, url = stub
    model = b"tree\n" * 1000
    sha = hashlib.sha256(model).hexdigest()
    state.routes["GET /jobs/j/artifact"] = lambda body: (
        200,
        {"job_id": "j", "sha256": sha, "size": len(model), "metrics": {"train_wape": 0.25}},
    )
    state.routes["GET /jobs/j/artifact/model"] = lambda body: (200, model)
    client = HttpGpuService(url, "t")
    artifact = client.download("j", tmp_path / "ok")
    assert (artifact.sha256, artifact.metrics) == (sha, {"train_wape": 0.25})
    assert artifact.path.read_bytes() == model

    state.routes["GET /jobs/j/artifact/model"] = lambda body: (200, model + b"x")
    with pytest.raises(ArtifactCorrupt) as corrupt:
        client.download("j", tmp_path / "bad")
    assert sha in str(corrupt.value)
    assert hashlib.sha256(model + b"x").hexdigest() in str(corrupt.value)
    assert list((tmp_path / "bad").iterdir()) == []


def test_a_503_is_retried_then_reported(stub: tuple[Stub, str]) -> None:
    state, url = stub
    answers = iter(
        [(503, {"detail": "database unavailable; retry later"}), (200, job_json("a", "running"))]
    )
    state.routes["GET /jobs/a"] = lambda body: next(answers)
    assert HttpGpuService(url, "t", retry_delay=0.01).get("a").status == JobStatus.RUNNING
    assert len(state.requests) == 2
    state.routes["GET /jobs/a"] = lambda body: (503, {"detail": "database unavailable"})
    with pytest.raises(GpuServiceError, match="database unavailable") as error:
        HttpGpuService(url, "t", retry_delay=0.01).get("a")
    assert error.value.status == 503
    assert len(state.requests) == 2 + 3


def test_the_resource_resolves_url_and_token_in_one_place(monkeypatch: pytest.MonkeyPatch):
    """Unset, the resource follows settings: the local service's port, the dev token."""
    from retrain_assets.models.resources import GpuServiceResource
    from retrain_assets.settings import DEV_TOKEN

    for name in ("RETRAIN_GPU_URL", "RETRAIN_GPU_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RETRAIN_GPU_PORT", "9876")
    client = GpuServiceResource().client()
    assert client.base_url == "http://127.0.0.1:9876"
    assert client._session.headers["Authorization"] == f"Bearer {DEV_TOKEN}"
    monkeypatch.setenv("RETRAIN_GPU_URL", "http://gpu.example:1/")
    monkeypatch.setenv("RETRAIN_GPU_TOKEN", "secret")
    client = GpuServiceResource().client()
    assert client.base_url == "http://gpu.example:1"
    assert client._session.headers["Authorization"] == "Bearer secret"
