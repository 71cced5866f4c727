"""A service started the ordinary way: no fault injection, and the dev token when none is set."""

from pathlib import Path

import pytest

from retrain_assets.store.server import PostgresServer
from retrain_assets_tests.gpu.service_process import running_service, training_spec

pytestmark = pytest.mark.system


def test_faults_are_refused_and_an_unset_token_means_the_dev_token(
    pg_server: PostgresServer, tmp_path: Path, dataset: Path
) -> None:
    with running_service(
        pg_url=pg_server.url, home=tmp_path, allow_faults=False, token=None
    ) as service:
        assert "RETRAIN_GPU_TOKEN is not set" in service.log()
        spec = training_spec(dataset, faults={"fail_at_round": 3})
        response = service.call("POST", "/jobs", json={"idempotency_key": "f", "spec": spec})
        assert response.status_code == 422
        assert response.json()["detail"] == "fault injection is disabled on this service"
        assert service.call("GET", "/jobs?idempotency_key=f").status_code == 404

        response = service.call("GET", "/jobs?idempotency_key=f", token="test-token")
        assert response.status_code == 401
        job = service.client().submit("plain", training_spec(dataset))  # dev-token works
        assert job.attempt == 1
    assert service.process is not None
    assert service.process.returncode == 0, service.log()  # SIGTERM: a clean exit
