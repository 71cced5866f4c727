"""FakeGpu, the one fake GPU service, keeps the real service's promises."""

import hashlib
from pathlib import Path

import pytest

from retrain_assets.gpu.client import GpuServiceError
from retrain_assets.gpu.protocol import ArtifactCorrupt, GpuService, JobConflict, JobStatus
from retrain_assets_tests.machines.fakes import FakeGpu

SPEC = {"customer": "acme", "dataset_url": "/data/acme.parquet", "features": ["lag_7"]}


def test_the_fake_is_a_gpu_service() -> None:
    service: GpuService = FakeGpu(validate_specs=True)
    assert service.find("nothing") is None


def test_same_key_and_spec_is_the_same_job_another_spec_conflicts() -> None:
    fake = FakeGpu(validate_specs=True)
    job = fake.submit("k", SPEC)
    assert (job.status, job.attempt, job.total_rounds) == (JobStatus.QUEUED, 1, 200)
    assert fake.submit("k", dict(SPEC)) == job
    assert fake.submit("k", {**SPEC, "label": "units_sold"}) == job  # defaults spelled out
    with pytest.raises(JobConflict, match="'k'"):
        fake.submit("k", {**SPEC, "customer": "other"})
    assert fake.find("k") == job
    assert fake.submit("other-key", SPEC).id != job.id


def test_a_failed_job_resubmitted_is_the_next_attempt_from_its_checkpoint() -> None:
    fake = FakeGpu(validate_specs=True)
    job = fake.submit("k", SPEC)
    fake.advance(job.id, JobStatus.RUNNING, rounds_done=60, last_checkpoint_round=50)
    failed = fake.advance(job.id, JobStatus.FAILED, error="worker crashed at round 61")
    assert (failed.status, failed.error) == (JobStatus.FAILED, "worker crashed at round 61")
    again = fake.submit("k", SPEC)
    assert (again.id, again.status, again.attempt) == (job.id, JobStatus.QUEUED, 2)
    assert (again.rounds_done, again.last_checkpoint_round, again.error) == (50, 50, None)
    succeeded = fake.finish(job.id)
    assert fake.submit("k", SPEC) == succeeded  # a succeeded job is never retrained


def test_cancel_statuses_and_unknown_jobs() -> None:
    fake = FakeGpu(validate_specs=True)
    first, second = fake.submit("a", SPEC), fake.submit("b", SPEC)
    assert fake.cancel(first.id).status == JobStatus.CANCELLED
    assert fake.submit("a", SPEC).attempt == 2  # a cancelled job is requeued too
    assert set(fake.statuses([first.id, second.id, "nope"])) == {first.id, second.id}
    with pytest.raises(GpuServiceError) as unknown:
        fake.get("nope")
    assert unknown.value.status == 404
    assert fake.calls["statuses"] == 1


def test_download_verifies_the_hash_and_a_corrupted_model_is_refused(tmp_path: Path) -> None:
    fake = FakeGpu(validate_specs=True)
    job = fake.submit("k", SPEC)
    with pytest.raises(GpuServiceError) as early:
        fake.download(job.id, tmp_path)
    assert early.value.status == 409
    fake.finish(job.id, b"tree\n", {"wape": 0.2})
    artifact = fake.download(job.id, tmp_path / "ok")
    assert artifact.path.read_bytes() == b"tree\n"
    assert artifact.sha256 == hashlib.sha256(b"tree\n").hexdigest()
    assert artifact.metrics == {"wape": 0.2}
    fake.corrupt(job.id)
    with pytest.raises(ArtifactCorrupt, match=artifact.sha256):
        fake.download(job.id, tmp_path / "bad")
    assert not (tmp_path / "bad" / "model.txt").exists()


def test_specs_are_validated_like_the_service_when_asked() -> None:
    with pytest.raises(GpuServiceError, match="features") as invalid:
        FakeGpu(validate_specs=True).submit("k", {"customer": "acme", "dataset_url": "/x"})
    assert invalid.value.status == 422
    loose = FakeGpu()
    job = loose.submit("k", {"anything": 1, "params": {"num_boost_round": 7}})
    assert job.total_rounds == 7
    with pytest.raises(JobConflict):
        loose.submit("k", {"anything": 2})
