"""The real service process against hostile or broken requests: never a 500, never an echo.

The token and the declared body size are checked before a byte of the body is read, a body
without a length is cut at the limit, a 422 names the field without repeating its value,
NaN/Infinity and control characters are refused, lists and ids are bounded, and a stored
training error is bounded too.
"""

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from retrain_assets.gpu.service.http_guard import MAX_BODY_BYTES
from retrain_assets.gpu.service.job_store import MAX_ERROR_CHARS
from retrain_assets.gpu.service.schemas import MAX_FEATURES
from retrain_assets.store.server import PostgresServer
from retrain_assets_tests.gpu.service_process import (
    TOKEN,
    ServiceProcess,
    running_service,
    training_spec,
)
from retrain_assets_tests.support.waiting import patience

pytestmark = pytest.mark.system
BIG = 50 << 20  # the size of the requests in the report that took the service to 1.1 GB


@pytest.fixture(scope="module")
def service(
    pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    with running_service(pg_url=pg_server.url, home=tmp_path_factory.mktemp("gpu-in")) as svc:
        yield svc
    assert svc.process is not None
    assert svc.process.returncode == 0, svc.log()


def _status_line(connection: socket.socket) -> str:
    data = b""
    while b"\r\n" not in data:
        got = connection.recv(4096)
        if not got:
            break
        data += got
    return data.split(b"\r\n", 1)[0].decode()


def _json_body(size: int) -> Iterator[bytes]:
    """Yield a valid JSON body `{"ids": [...]}` of exactly `size` bytes, 1 MB at a time."""
    start, end, item = b'{"ids": [', b'"x"]}', b'"abcdefghij",'
    count, pad = divmod(size - len(start) - len(end), len(item))
    yield start
    while count:
        batch = min(count, 80_000)
        yield item * batch
        count -= batch
    yield b" " * pad + end


def _send_big_json(port: int, token: str | None, size: int = BIG) -> str:
    """POST a valid JSON body of `size` bytes to /jobs/status; return the status line.

    Sending stops early if the server closes the connection; the status line is read either
    way.
    """
    head = (
        "POST /jobs/status HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n"
        + (f"Authorization: Bearer {token}\r\n" if token else "")
        + "\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=patience(60)) as connection:
        connection.sendall(head.encode())
        try:
            for piece in _json_body(size):
                connection.sendall(piece)
        except OSError:
            pass  # the server answered and closed: what it answered is what counts
        return _status_line(connection)


def test_no_token_is_a_401_before_any_body_is_read(service: ServiceProcess) -> None:
    head = (
        f"POST /jobs HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {BIG}\r\n\r\n{{"
    )
    with socket.create_connection(("127.0.0.1", service.port), timeout=patience(10)) as conn:
        conn.sendall(head.encode())  # one byte of a 50 MB body, then wait for the answer
        assert _status_line(conn) == "HTTP/1.1 401 Unauthorized"
    broken = service.call(
        "POST", "/jobs", token=None, data=b"{not json", headers={"content-type": "application/json"}
    )
    assert broken.status_code == 401  # not a 422 about the body: the token comes first
    assert broken.headers["www-authenticate"] == "Bearer"


def test_eight_large_unauthenticated_requests_leave_the_memory_bounded(
    service: ServiceProcess,
) -> None:
    assert service.process is not None
    process = psutil.Process(service.process.pid)
    answers: list[str] = []
    senders = [
        threading.Thread(target=lambda: answers.append(_send_big_json(service.port, None)))
        for _ in range(8)
    ]
    for sender in senders:
        sender.start()
    peak = process.memory_info().rss
    while any(sender.is_alive() for sender in senders):  # sample while the bodies stream in
        peak = max(peak, process.memory_info().rss)
        time.sleep(0.02)
    assert answers == ["HTTP/1.1 401 Unauthorized"] * 8
    after = process.memory_info().rss
    assert peak < 300 << 20, f"service RSS peaked at {peak >> 20} MB"
    assert after < 300 << 20, f"service RSS {after >> 20} MB after the requests"


def test_a_body_over_the_limit_is_a_413(service: ServiceProcess) -> None:
    declared = _send_big_json(service.port, TOKEN, size=MAX_BODY_BYTES + 1)
    assert declared.startswith("HTTP/1.1 413")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"ids": ['
        for _ in range(3):
            yield b'"abcdefghij",' * 80_000
        yield b'"x"]}'

    streamed = service.call(
        "POST", "/jobs/status", data=chunks(), headers={"content-type": "application/json"}
    )
    assert streamed.status_code == 413, streamed.text


def test_a_422_names_the_field_and_never_echoes_the_value(
    service: ServiceProcess, dataset: Path
) -> None:
    response = service.submit("echo", training_spec(dataset, features=["y" * 300_000]))
    assert response.status_code == 422
    assert "spec.features.0: String should have at most 200 characters" in response.text
    assert "yyyyyyyyyy" not in response.text
    assert len(response.content) < 2000

    spec = training_spec(dataset)
    spec["z" * 100_000] = 1  # an unknown field with a huge name
    response = service.submit("echo", spec)
    assert response.status_code == 422
    assert "Extra inputs are not permitted" in response.json()["message"]
    assert len(response.content) < 2000

    response = service.submit("echo", training_spec(dataset, customer="../x/y"))
    assert response.status_code == 422
    assert "spec.customer" in response.json()["message"]
    assert "../x/y" not in response.text
    response = service.submit("echo", training_spec(dataset, customer="abc\n"))
    assert response.status_code == 422
    assert "not a safe slug" in response.json()["message"]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_not_json_and_a_422(
    service: ServiceProcess, dataset: Path, literal: str
) -> None:
    body = (
        '{"idempotency_key": "nan", "spec": {"customer": "acme", '
        f'"dataset_url": "{dataset.as_uri()}", "features": ["price"], '
        f'"params": {{"learning_rate": {literal}}}}}}}'
    )
    response = service.call(
        "POST", "/jobs", data=body.encode(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert f"{literal} is not valid JSON" in response.json()["message"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/jobs/%00"),
        ("POST", "/jobs/%00/cancel"),
        ("GET", "/jobs/%00/artifact"),
        ("GET", "/jobs/%00/artifact/model"),
        ("GET", "/jobs/" + "a" * 65),
        ("GET", "/jobs?idempotency_key=%00"),
    ],
)
def test_a_malformed_id_is_a_422_not_a_500(service: ServiceProcess, method: str, path: str) -> None:
    response = service.call(method, path)
    assert response.status_code == 422, response.text


def test_lists_ids_and_text_fields_are_bounded(service: ServiceProcess, dataset: Path) -> None:
    too_many = [f"f{n}" for n in range(MAX_FEATURES + 1)]
    response = service.submit("bounds", training_spec(dataset, features=too_many))
    assert response.status_code == 422
    assert "spec.features: List should have at most 500 items" in response.json()["message"]

    for ids in (["x" * 65], ["a\x00b"], ["ok"] * 501):
        response = service.call("POST", "/jobs/status", json={"ids": ids})
        assert response.status_code == 422, response.text
        assert response.json()["message"].startswith("invalid request: ids")

    response = service.submit("bounds", training_spec(dataset, features=["price\x00"]))
    assert response.status_code == 422, response.text
    response = service.submit("bounds", training_spec(dataset, faults={"on_attempts": [1] * 101}))
    assert response.status_code == 422, response.text


def test_a_long_training_error_is_stored_cut_to_its_bound(
    service: ServiceProcess, dataset: Path
) -> None:
    missing = [f"missing_column_{n:03d}_{'q' * 170}" for n in range(MAX_FEATURES)]
    job_id = service.submit("long-error", training_spec(dataset, features=missing)).json()["id"]
    failed = service.wait_for(job_id)
    assert failed["status"] == "failed"
    assert len(failed["error"]) < MAX_ERROR_CHARS + 100
    assert failed["error"].endswith("more characters cut)")
    assert len(failed["runs"][0]["error"]) < MAX_ERROR_CHARS + 100
