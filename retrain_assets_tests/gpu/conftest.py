import hashlib
from pathlib import Path

import pytest

from retrain_assets.gpu.service.schemas import TrainingSpec
from retrain_assets.gpu.service.trainer import train
from retrain_assets_tests.gpu.service_process import training_spec, write_dataset


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic Parquet dataset shared by every GPU test."""
    return write_dataset(tmp_path_factory.mktemp("gpu-data") / "train.parquet")


@pytest.fixture(scope="session")
def baseline_sha256(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The sha256 of the default spec trained here, uninterrupted and without faults."""
    result = train(
        TrainingSpec.model_validate(training_spec(dataset)), tmp_path_factory.mktemp("b")
    )
    assert result.sha256 == hashlib.sha256(result.model_path.read_bytes()).hexdigest()
    return result.sha256
