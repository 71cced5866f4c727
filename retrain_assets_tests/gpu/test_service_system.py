"""The real GPU service process over HTTP: auth, validation, idempotency, training, faults."""

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrain_assets.gpu.protocol import ArtifactCorrupt, JobConflict, JobStatus
from retrain_assets.store.server import PostgresServer
from retrain_assets_tests.gpu.service_process import ServiceProcess, running_service, training_spec

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def service(
    pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    with running_service(pg_url=pg_server.url, home=tmp_path_factory.mktemp("gpu-home")) as svc:
        yield svc
    assert svc.process is not None
    assert svc.process.returncode == 0, svc.log()


def test_health_and_schema_need_no_token(service: ServiceProcess) -> None:
    assert service.call("GET", "/healthz", token=None).json()["status"] == "ok"
    schema = service.call("GET", "/openapi.json", token=None).json()
    assert {"/jobs", "/jobs/status", "/jobs/{job_id}", "/jobs/{job_id}/cancel"} <= set(
        schema["paths"]
    )
    assert "TrainingSpec" in schema["components"]["schemas"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/jobs"),
        ("GET", "/jobs?idempotency_key=k"),
        ("POST", "/jobs/status"),
        ("GET", "/jobs/some-id"),
        ("POST", "/jobs/some-id/cancel"),
        ("GET", "/jobs/some-id/artifact"),
        ("GET", "/jobs/some-id/artifact/model"),
    ],
)
def test_every_endpoint_refuses_a_missing_or_wrong_token(
    service: ServiceProcess, method: str, path: str
) -> None:
    for token in (None, "wrong-token"):
        response = service.call(method, path, token=token, json={})
        assert response.status_code == 401, (token, response.text)
        assert response.headers["www-authenticate"] == "Bearer"


def test_malformed_bodies_are_422_naming_the_field(service: ServiceProcess, dataset: Path) -> None:
    spec = training_spec(dataset)
    del spec["features"]
    response = service.submit("k-missing", spec)
    assert response.status_code == 422
    assert "spec.features: Field required" in response.json()["message"]

    response = service.submit("has a space", training_spec(dataset))
    assert response.status_code == 422
    assert "idempotency_key" in response.json()["message"]

    spec = training_spec(dataset, params={"num_boost_round": 0})
    response = service.submit("k-zero", spec)
    assert response.status_code == 422
    assert "spec.params.num_boost_round" in response.json()["message"]

    spec = training_spec(dataset, params={"num_boost_rounds": 10})  # misspelt: refused
    assert "spec.params.num_boost_rounds" in service.submit("k-typo", spec).json()["message"]

    response = service.call("POST", "/jobs/status", json={"ids": ["x"] * 501})
    assert response.status_code == 422
    assert response.json()["message"].startswith("invalid request: ids:")


def test_same_key_and_spec_is_the_same_job_and_another_spec_conflicts(
    service: ServiceProcess, dataset: Path
) -> None:
    spec = training_spec(dataset)
    first = service.submit("idem-1", spec)
    assert first.status_code == 201, first.text
    again = service.submit("idem-1", spec)
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]

    # Spelling out the defaults is the same spec: the comparison is on the canonical form.
    explicit = training_spec(dataset, label="units_sold")
    explicit["params"] = {**spec["params"], "learning_rate": 0.05, "objective": "poisson"}
    assert service.submit("idem-1", explicit).json()["id"] == first.json()["id"]

    conflict = service.submit("idem-1", training_spec(dataset, customer="other"))
    assert conflict.status_code == 409
    assert "'idem-1'" in conflict.json()["detail"]
    with pytest.raises(JobConflict, match="idem-1"):
        service.client().submit("idem-1", training_spec(dataset, customer="other"))

    client = service.client()
    found = client.find("idem-1")
    assert found is not None
    assert found.id == first.json()["id"]
    assert client.find("never-used") is None
    assert service.call("GET", "/jobs?idempotency_key=never-used").status_code == 404
    assert service.call("GET", "/jobs/not-a-job").status_code == 404


def test_one_call_answers_the_status_of_many_jobs(service: ServiceProcess, dataset: Path) -> None:
    ids = [service.submit(f"batch-{n}", training_spec(dataset)).json()["id"] for n in range(3)]
    response = service.call("POST", "/jobs/status", json={"ids": [*ids, "unknown"]})
    assert response.status_code == 200
    body = response.json()
    assert [job["id"] for job in body["jobs"]] == ids
    assert body["missing"] == ["unknown"]
    statuses = service.client().statuses([*ids, "unknown"])
    assert set(statuses) == set(ids)
    assert all(job.total_rounds == 40 for job in statuses.values())


def test_a_job_trains_and_its_artifact_verifies_until_tampered_with(
    service: ServiceProcess, dataset: Path, baseline_sha256: str, tmp_path: Path
) -> None:
    client = service.client()
    job = client.submit("train-ok", training_spec(dataset))
    assert job.status == JobStatus.QUEUED
    done = service.wait_for(job.id)
    assert done["status"] == "succeeded", done
    assert (done["rounds_done"], done["last_checkpoint_round"]) == (40, 40)

    announced = service.call("GET", f"/jobs/{job.id}/artifact").json()
    assert announced["sha256"] == baseline_sha256  # same bytes as training here: deterministic
    assert announced["metrics"]["rows"] == 3000
    assert announced["metrics"]["rounds"] == 40
    assert 0 < announced["metrics"]["train_wape"] < 1
    assert announced["metrics"]["train_rmse"] > 0

    artifact = client.download(job.id, tmp_path / "ok")
    assert artifact.sha256 == baseline_sha256
    assert hashlib.sha256(artifact.path.read_bytes()).hexdigest() == baseline_sha256
    assert artifact.path == tmp_path / "ok" / "model.txt"
    assert artifact.metrics["train_wape"] == announced["metrics"]["train_wape"]

    model_on_service = service.data_dir / "jobs" / job.id / "model.txt"
    model_on_service.write_bytes(model_on_service.read_bytes().replace(b"Tree=1", b"Tree=9"))
    with pytest.raises(ArtifactCorrupt) as corrupt:
        client.download(job.id, tmp_path / "bad")
    assert baseline_sha256 in str(corrupt.value)
    assert hashlib.sha256(model_on_service.read_bytes()).hexdigest() in str(corrupt.value)
    assert not (tmp_path / "bad" / "model.txt").exists()


def test_a_failed_job_resubmitted_resumes_from_its_checkpoint(
    service: ServiceProcess, dataset: Path, baseline_sha256: str
) -> None:
    spec = training_spec(dataset, faults={"fail_at_round": 27})
    first = service.submit("fail-then-resume", spec).json()
    failed = service.wait_for(first["id"])
    assert failed["status"] == "failed"
    assert failed["error"] == "InjectedFailure: injected failure at round 27"
    assert failed["last_checkpoint_round"] == 20
    assert service.call("GET", f"/jobs/{first['id']}/artifact").status_code == 409

    resubmitted = service.submit("fail-then-resume", spec)
    assert resubmitted.status_code == 200
    assert resubmitted.json()["id"] == first["id"]
    assert resubmitted.json()["attempt"] == 2
    done = service.wait_for(first["id"])
    assert done["status"] == "succeeded", done
    assert [(r["attempt"], r["started_from_round"], r["outcome"]) for r in done["runs"]] == [
        (1, 0, "failed"),
        (2, 20, "succeeded"),
    ]
    artifact = service.call("GET", f"/jobs/{first['id']}/artifact").json()
    assert artifact["sha256"] == baseline_sha256  # resumed == never interrupted, byte for byte


def test_a_crashed_worker_fails_the_job_with_the_round(
    service: ServiceProcess, dataset: Path, baseline_sha256: str
) -> None:
    spec = training_spec(dataset, faults={"crash_at_round": 15})
    job_id = service.submit("crash", spec).json()["id"]
    failed = service.wait_for(job_id)
    assert failed["status"] == "failed"
    assert failed["error"] == "worker crashed at round 15"
    assert failed["runs"][0]["outcome"] == "crashed"
    assert failed["runs"][0]["exit_code"] == 1

    job = service.client().submit("crash", spec)  # the platform's retry: same key
    assert (job.status, job.attempt) == (JobStatus.QUEUED, 2)
    done = service.wait_for(job_id)
    assert done["status"] == "succeeded", done
    assert done["runs"][-1]["started_from_round"] == 10
    assert service.call("GET", f"/jobs/{job_id}/artifact").json()["sha256"] == baseline_sha256


def test_a_running_job_stops_at_the_next_round_when_cancelled(
    service: ServiceProcess, dataset: Path
) -> None:
    spec = training_spec(
        dataset, params={"num_boost_round": 400}, faults={"slow_seconds_per_round": 0.05}
    )
    job_id = service.submit("cancel-running", spec).json()["id"]
    service.wait_for(job_id, lambda job: job["rounds_done"] >= 3)
    service.client().cancel(job_id)
    cancelled = service.wait_for(job_id, seconds=10)
    assert cancelled["status"] == "cancelled"
    assert cancelled["rounds_done"] < 400
    assert cancelled["runs"][-1]["outcome"] == "cancelled"
    assert service.call("GET", f"/jobs/{job_id}/artifact/model").status_code == 409


def test_any_training_error_becomes_the_job_error(service: ServiceProcess, tmp_path: Path) -> None:
    spec = training_spec(tmp_path / "never-exported.parquet")
    job_id = service.submit("no-dataset", spec).json()["id"]
    failed = service.wait_for(job_id)
    assert failed["status"] == "failed"
    assert failed["error"].startswith("FileNotFoundError: ")
    assert "never-exported.parquet" in failed["error"]
