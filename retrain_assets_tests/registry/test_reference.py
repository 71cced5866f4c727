"""The gate's reference, read from a real MLflow registry: champion, else challenger, else naive."""

import numpy as np
import pytest

from retrain_assets.models.reference import choose_reference
from retrain_assets.registry import MlflowRegistry
from retrain_assets.registry.mlflow_registry import (
    CHALLENGER,
    CHAMPION,
    WITHDRAWN_TAG,
    model_name,
)
from retrain_assets_tests.registry.logged_runs import FEATURES, customer, logged_run, run_key

pytestmark = pytest.mark.system


def registered(registry, name, model_file, example_frame) -> tuple[str, str]:
    key = run_key()
    return key, registry.register(
        name, key, logged_run(registry, name, key, model_file, example_frame)
    )


def test_the_reference_is_the_champion_else_the_challenger_never_the_candidate_itself(
    mlflow_uri, model_file, example_frame, monkeypatch
):
    monkeypatch.setattr(
        "retrain_assets.models.gate.MODEL_FEATURES",
        FEATURES,  # the tiny test model's
    )
    registry, name = MlflowRegistry(mlflow_uri), customer()
    nothing = choose_reference(registry, name, run_key())
    assert (nothing.model, nothing.champion_version) == (None, None)  # seasonal naive

    first_key, first = registered(registry, name, model_file, example_frame)
    chosen = choose_reference(registry, name, run_key())
    assert (chosen.model.label, chosen.model.alias, chosen.model.version) == (
        f"challenger {model_name(name)} v{first}",
        CHALLENGER,
        first,
    )
    assert chosen.champion_version is None
    expected = registry.load_version(name, first).predict(example_frame[FEATURES])
    assert np.allclose(chosen.model.predict(example_frame), expected)  # loaded, scored now
    assert choose_reference(registry, name, first_key).model is None  # a re-gate of itself

    registry.client.set_registered_model_alias(model_name(name), CHAMPION, first)
    _, second = registered(registry, name, model_file, example_frame)
    assert choose_reference(registry, name, run_key()).model.label == (
        f"champion {model_name(name)} v{first}"
    )
    regate_champion = choose_reference(registry, name, first_key)
    assert regate_champion.model.label == f"challenger {model_name(name)} v{second}"
    assert regate_champion.champion_version == first


def test_withdrawing_an_alias_records_why_on_the_version(mlflow_uri, model_file, example_frame):
    registry, name = MlflowRegistry(mlflow_uri), customer()
    _, first = registered(registry, name, model_file, example_frame)
    assert registry.withdraw_alias(name, CHALLENGER, first, "candidate WAPE 0.41 does not beat")
    assert registry.aliased_version(name, CHALLENGER) is None
    version = registry.client.get_model_version(model_name(name), first)
    assert version.aliases == []
    assert version.tags[WITHDRAWN_TAG] == "challenger: candidate WAPE 0.41 does not beat"
    _, second = registered(registry, name, model_file, example_frame)
    assert not registry.withdraw_alias(name, CHALLENGER, first, "stale")  # not its alias now
    assert registry.aliased_version(name, CHALLENGER).version == second
