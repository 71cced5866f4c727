"""The injected service outage (issue 31): 503 for every call but /healthz, then normal again."""

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
