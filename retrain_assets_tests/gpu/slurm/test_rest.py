"""SlurmRest against a stand-in HTTP server: which answers are errors, outages or unknown jobs.

The real slurmrestd is driven in test_slurm_system.py; here are the answers a real one gives
only when broken (garbage, an HTML error page) or slowly (slurmctld down: 18 s), shaped as
measured on Slurm 22.05.8 here.
"""

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from retrain_assets.gpu.slurm.rest import SlurmRest, SlurmRestError, UnknownJob, transport_for
from retrain_assets.machines.outage import is_unreachable
from retrain_assets_tests.support.processes import free_port

Reply = tuple[int, bytes]
StandIn = tuple[dict[str, Reply], str]


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    """A loopback HTTP server answering each path with the (status, body) put in the dict."""
    replies: dict[str, Reply] = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            status, body = replies[self.path]
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield replies, f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()


def _errors(number: int, text: str) -> bytes:
    return (
        b'{"meta": {}, "errors": [{"error_number": %d, "error": "%s", "description": "d"}],'
        b' "jobs": []}' % (number, text.encode())
    )


def test_an_unknown_job_is_an_answer_the_controller_down_an_outage(stand_in: StandIn) -> None:
    replies, url = stand_in
    replies["/slurm/v0.0.38/job/7"] = (500, _errors(2017, "Invalid job id specified"))
    replies["/slurm/v0.0.38/jobs"] = (500, _errors(-1, "Unable to contact slurm controller"))
    rest = SlurmRest(url)
    with pytest.raises(
        UnknownJob, match=r"Invalid job id specified / d \(error_number 2017\)"
    ) as gone:
        rest.job(7)
    assert gone.value.status == 500 and not is_unreachable(gone.value)
    with pytest.raises(SlurmRestError, match="Unable to contact slurm controller") as down:
        rest.jobs()
    assert down.value.status is None and is_unreachable(down.value)


def test_garbage_and_wrong_shapes_are_errors_naming_the_call(stand_in: StandIn) -> None:
    replies, url = stand_in
    replies["/slurm/v0.0.38/jobs"] = (200, b"<html>proxy error</html>")
    replies["/slurm/v0.0.38/ping"] = (502, b"bad gateway")
    replies["/slurm/v0.0.38/job/3"] = (200, b'{"jobs": {"not": "a list"}}')
    rest = SlurmRest(url)
    with pytest.raises(SlurmRestError, match=r"GET /jobs -> 200: not a JSON object: '<html>"):
        rest.jobs()
    with pytest.raises(SlurmRestError, match="GET /ping -> None") as gateway:
        rest.ping()
    assert is_unreachable(gateway.value)  # a proxy that cannot reach slurmrestd: an outage
    with pytest.raises(SlurmRestError, match="'jobs' is not a list"):
        rest.job(3)


def test_a_200_that_carries_an_error_is_an_error(stand_in: StandIn) -> None:
    replies, url = stand_in
    replies["/slurm/v0.0.38/jobs"] = (200, _errors(5005, "Access denied"))
    with pytest.raises(SlurmRestError, match=r"Access denied / d \(error_number 5005\)"):
        SlurmRest(url).jobs()


def test_nothing_listening_is_an_outage(tmp_path: Path) -> None:
    rest = SlurmRest(f"unix://{tmp_path / 'no.socket'}")
    with pytest.raises(SlurmRestError, match="GET /jobs -> None: ConnectError") as nobody:
        rest.jobs()
    assert is_unreachable(nobody.value)


@pytest.mark.parametrize("url", ["", "slurm:6820", "unix://", "ftp://host/x", "http://"])
def test_a_url_of_another_form_is_refused_saying_which_forms_work(url: str) -> None:
    with pytest.raises(ValueError, match=r"is not unix:///path/to/socket or http\(s\)://host"):
        transport_for(url)
