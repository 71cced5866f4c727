"""A tiny LightGBM model and its features for the registry tests (the server: root conftest)."""

from pathlib import Path

import lightgbm
import numpy as np
import pandas as pd
import pytest

from retrain_assets_tests.registry.logged_runs import FEATURES


@pytest.fixture(scope="module")
def example_frame() -> pd.DataFrame:
    """A few hundred rows of demand features."""
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            "lag_7": rng.uniform(0, 100, 300),
            "lag_28": rng.uniform(0, 100, 300),
            "is_holiday": rng.integers(0, 2, 300).astype("int64"),
        }
    )


@pytest.fixture(scope="module")
def model_file(example_frame: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny LightGBM model saved as text, as the GPU service writes it."""
    target = 0.6 * example_frame["lag_7"] + 0.3 * example_frame["lag_28"]
    booster = lightgbm.train(
        {"objective": "regression", "num_leaves": 4, "verbose": -1, "seed": 1},
        lightgbm.Dataset(example_frame[FEATURES], label=target),
        num_boost_round=5,
    )
    path = tmp_path_factory.mktemp("model") / "model.txt"
    booster.save_model(str(path))
    return path
