"""Candidate runs logged to the session's MLflow server, each under names of its own."""

from __future__ import annotations

import uuid
from pathlib import Path

import pandas as pd

from retrain_assets.registry import MlflowRegistry

FEATURES = ["lag_7", "lag_28", "is_holiday"]  # the columns of conftest's example_frame
PNG = b"\x89PNG\r\n\x1a\nnot really a picture"
METRICS = {"holdout_mape": 0.12, "holdout_rmse": 3.4}


def customer() -> str:
    """A customer of its own per test: the server is shared by the module."""
    return f"c{uuid.uuid4().hex[:8]}"


def run_key() -> str:
    """A fresh run key."""
    return uuid.uuid4().hex[:16]


def logged_run(
    registry: MlflowRegistry,
    name: str,
    key: str,
    model_file: Path,
    example_frame: pd.DataFrame,
) -> str:
    """Log a candidate run (model, metrics, example, plot) under `key`; return its run id."""
    run_id = registry.candidate_run(name, key, {"snapshot_id": "s1"})
    registry.log_candidate(run_id, model_file, METRICS, example_frame.head(5), PNG)
    return run_id
