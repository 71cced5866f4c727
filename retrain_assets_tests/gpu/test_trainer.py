"""The trainer without the service: determinism, resume from a checkpoint, faults, bad data."""

from pathlib import Path

import pytest

from retrain_assets.gpu.service.faults import FaultPlan, InjectedFailure
from retrain_assets.gpu.service.schemas import Faults, TrainingSpec
from retrain_assets.gpu.service.trainer import TrainingHooks, checkpoint_file, train
from retrain_assets_tests.gpu.service_process import training_spec


def spec_for(dataset: Path, **overrides: object) -> TrainingSpec:
    return TrainingSpec.model_validate(training_spec(dataset, **overrides))


def test_an_interrupted_then_resumed_training_writes_the_identical_model(
    dataset: Path, tmp_path: Path, baseline_sha256: str
) -> None:
    spec = spec_for(dataset)
    checkpoints: list[int] = []
    plan = FaultPlan(fail_at_round=26)
    hooks = TrainingHooks(
        before_round=plan.before_round,
        on_checkpoint=lambda round_no, _path: checkpoints.append(round_no),
    )
    with pytest.raises(InjectedFailure, match="round 26"):
        train(spec, tmp_path, hooks=hooks)
    assert checkpoints == [10, 20]
    assert not checkpoint_file(tmp_path, 10).exists()  # only the latest checkpoint is kept

    rounds: list[int] = []
    result = train(
        spec,
        tmp_path,
        start_round=20,
        checkpoint=checkpoint_file(tmp_path, 20),
        hooks=TrainingHooks(after_round=rounds.append),
    )
    assert rounds == list(range(21, 41))  # rounds 1..20 were not trained again
    assert result.sha256 == baseline_sha256
    assert result.model_path.read_bytes() == checkpoint_file(tmp_path, 40).read_bytes()


def test_the_same_spec_trains_the_same_bytes_and_other_params_other_bytes(
    dataset: Path, tmp_path: Path, baseline_sha256: str
) -> None:
    assert train(spec_for(dataset), tmp_path / "a").sha256 == baseline_sha256
    other = spec_for(dataset, params={"num_boost_round": 40, "num_leaves": 7})
    assert train(other, tmp_path / "b").sha256 != baseline_sha256


def test_a_missing_checkpoint_or_column_is_an_error_naming_it(
    dataset: Path, tmp_path: Path
) -> None:
    with pytest.raises(FileNotFoundError, match="round 20"):
        train(spec_for(dataset), tmp_path, start_round=20, checkpoint=tmp_path / "nope.txt")
    bad = spec_for(dataset, features=["lag_7", "no_such_column"])
    with pytest.raises(ValueError, match="no_such_column"):
        train(bad, tmp_path)


def test_faults_apply_only_on_the_listed_attempts() -> None:
    faults = Faults(fail_at_round=3, slow_seconds_per_round=0.5, on_attempts=[1, 3])
    assert FaultPlan.for_attempt(faults, 1) == FaultPlan(3, None, 0.5)
    assert FaultPlan.for_attempt(faults, 2) == FaultPlan()
    assert FaultPlan.for_attempt(None, 1) == FaultPlan()
    FaultPlan(fail_at_round=3).before_round(2)  # other rounds pass
    with pytest.raises(InjectedFailure):
        FaultPlan(fail_at_round=3).before_round(3)


def test_the_canonical_spec_fills_defaults_so_equal_meanings_compare_equal(dataset: Path) -> None:
    short = spec_for(dataset)
    spelled = spec_for(
        dataset,
        label="units_sold",
        params={"num_boost_round": 40, "num_leaves": 15, "seed": 7, "objective": "poisson"},
        faults=None,
    )
    assert short.canonical_json() == spelled.canonical_json()
    assert short.canonical_json() != spec_for(dataset, checkpoint_every=5).canonical_json()
    with pytest.raises(ValueError, match="must not also be a feature"):
        spec_for(dataset, features=["lag_7", "units_sold"])
