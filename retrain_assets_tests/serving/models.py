"""Small real LightGBM models on the service's features, for the serving tests and benchmark."""

from __future__ import annotations

import lightgbm
import numpy as np
import pandas as pd

from retrain_assets.features.training_export import MODEL_FEATURES


def feature_frame(rows: int = 400, seed: int = 3, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """Return random demand features (MODEL_FEATURES, plus `extra` columns)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {name: rng.uniform(0, 50, rows) for name in MODEL_FEATURES if name != "on_promo"}
    )
    frame["on_promo"] = rng.integers(0, 2, rows).astype(float)
    frame["day_of_week"] = rng.integers(0, 7, rows).astype(float)
    for name in extra:
        frame[name] = rng.uniform(0, 1, rows)
    return frame[[*MODEL_FEATURES, *extra]]


def train(
    scale: float,
    offset: float,
    extra: tuple[str, ...] = (),
    rounds: int = 20,
    leaves: int = 15,
    rows: int = 400,
) -> lightgbm.Booster:
    """Return a booster predicting about `scale * lag_7 + offset` (versions tell apart)."""
    frame = feature_frame(rows, extra=extra)
    target = scale * frame["lag_7"] + offset + 0.3 * frame["rolling_mean_7"] * frame["on_promo"]
    return lightgbm.train(
        {"objective": "regression", "num_leaves": leaves, "verbose": -1, "seed": 1},
        lightgbm.Dataset(frame, label=target),
        num_boost_round=rounds,
    )
