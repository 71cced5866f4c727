"""The injected outage (issue 31) and answer (issue 38): every call but /healthz, for a while."""

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from retrain_assets.gpu.service.faults import InjectedOutage, OutageWindow


def answer(request):
    return JSONResponse({"ok": True})


def test_an_outage_answers_503_for_its_seconds_and_spares_healthz():
    window = OutageWindow()
    app = Starlette(routes=[Route("/jobs/status", answer), Route("/healthz", answer)])
    client = TestClient(InjectedOutage(app, window))
    assert client.get("/jobs/status").status_code == 200
    window.start(60)
    down = client.get("/jobs/status")
    assert down.status_code == 503
    assert down.json()["detail"].startswith("injected outage: unavailable for ")
    assert client.get("/healthz").status_code == 200
    window.until = 0.0  # the outage is over
    assert client.get("/jobs/status").status_code == 200


def test_an_injected_answer_is_that_status_and_text_and_spares_healthz():
    window = OutageWindow()
    app = Starlette(routes=[Route("/jobs/status", answer), Route("/healthz", answer)])
    client = TestClient(InjectedOutage(app, window))
    window.start(60, 200, "<html>maintenance</html>")
    garbled = client.post("/jobs/status")
    assert (garbled.status_code, garbled.text) == (200, "<html>maintenance</html>")
    assert garbled.headers["content-type"].startswith("text/plain")
    window.start(60, 401, "Authentication failure")
    assert (client.get("/jobs/status").status_code, client.get("/healthz").json()) == (
        401,
        {"ok": True},
    )
    window.until = 0.0
    assert client.get("/jobs/status").json() == {"ok": True}
