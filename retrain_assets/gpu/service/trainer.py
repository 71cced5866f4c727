"""LightGBM training in checkpointed chunks, deterministic for a seed.

Training always runs chunk by chunk, each chunk continuing from the previous chunk's saved
checkpoint file (never from the booster in memory). An uninterrupted run and one that was
stopped and resumed from a checkpoint therefore do exactly the same computation and write
byte-identical models. The trainer knows nothing of HTTP or the database: the worker hands it
hooks for progress, checkpoints and injected faults.

A spec with `intervals` also gets prediction intervals after the model is written: refits
before rolling origins (`conformal.py`) whose errors give each level's width, returned among
the metrics (`interval_halfwidth_80`, ...), so the artifact carries them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import lightgbm as lgb
import numpy as np
import pandas as pd

from retrain_assets.gpu.client import MODEL_FILE
from retrain_assets.gpu.service.conformal import conformal_intervals
from retrain_assets.gpu.service.schemas import TrainingParams, TrainingSpec


def _no_op(_: int) -> None:
    return None


def _ignore_checkpoint(_round: int, _path: Path) -> None:
    return None


@dataclass(frozen=True)
class TrainingHooks:
    """Calls the trainer makes; each receives a 1-based round number and may raise to stop."""

    before_round: Callable[[int], None] = _no_op
    after_round: Callable[[int], None] = _no_op
    on_checkpoint: Callable[[int, Path], None] = _ignore_checkpoint


@dataclass(frozen=True)
class TrainingResult:
    """The final model file and what it scored on its own training data."""

    model_path: Path
    sha256: str
    size: int
    metrics: dict[str, float]


def lightgbm_params(params: TrainingParams) -> dict[str, Any]:
    """Return LightGBM parameters that make training reproducible bit for bit.

    One thread, row-wise histograms and no bagging or feature sampling: nothing left to chance
    or to the machine's core count.
    """
    return {
        "objective": params.objective,
        "learning_rate": params.learning_rate,
        "num_leaves": params.num_leaves,
        "min_data_in_leaf": params.min_data_in_leaf,
        "seed": params.seed,
        "deterministic": True,
        "num_threads": 1,
        "force_row_wise": True,
        "bagging_fraction": 1.0,
        "bagging_freq": 0,
        "feature_fraction": 1.0,
        "verbosity": -1,
    }


def dataset_path(dataset_url: str) -> str:
    """Return a local path for a `file://` URL; other strings pass through unchanged."""
    parsed = urlparse(dataset_url)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    return dataset_url


def read_dataset(
    dataset_url: str, features: list[str], label: str
) -> tuple[np.ndarray, np.ndarray]:
    """Read the exported Parquet file; return the feature matrix and the label.

    Rows without a label are dropped (nothing to learn from); missing feature values stay NaN,
    which LightGBM handles. A missing or non-numeric column is an error naming it.
    """
    matrix, labels, _ = read_training_rows(dataset_url, features, label, None)
    return matrix, labels


def read_training_rows(
    dataset_url: str, features: list[str], label: str, date_column: str | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Return `read_dataset`'s matrix and label, and each row's day when `date_column` is set.

    The days place the rolling origins of the prediction intervals; a missing or unreadable
    date column is an error naming it.
    """
    frame = pd.read_parquet(dataset_path(dataset_url))
    wanted = [*features, label, *([date_column] if date_column else [])]
    missing = [column for column in wanted if column not in frame.columns]
    if missing:
        raise ValueError(f"dataset {dataset_url} has no column(s) {missing}")
    frame = frame[frame[label].notna()]
    if frame.empty:
        raise ValueError(f"dataset {dataset_url} has no rows with a {label!r} value")
    columns = []
    for column in [*features, label]:
        try:
            columns.append(frame[column].astype("float64").to_numpy())
        except (TypeError, ValueError) as err:
            raise ValueError(f"column {column!r} is not numeric: {err}") from err
    days = None
    if date_column:
        try:
            days = pd.to_datetime(frame[date_column]).to_numpy(dtype="datetime64[D]")
        except (TypeError, ValueError) as err:
            raise ValueError(f"column {date_column!r} does not hold dates: {err}") from err
        if np.isnat(days).any():
            raise ValueError(f"column {date_column!r} has {int(np.isnat(days).sum())} empty day(s)")
    return np.column_stack(columns[:-1]), columns[-1], days


def checkpoint_file(job_dir: Path, round_no: int) -> Path:
    """Return where the checkpoint after `round_no` rounds is kept."""
    return job_dir / "checkpoint" / f"round-{round_no:06d}.txt"


def train(
    spec: TrainingSpec,
    job_dir: Path,
    start_round: int = 0,
    checkpoint: Path | None = None,
    hooks: TrainingHooks | None = None,
) -> TrainingResult:
    """Train `spec` from `start_round` (0, or the round `checkpoint` was saved at) to the end.

    After each chunk of `spec.checkpoint_every` rounds the model is saved atomically and
    `hooks.on_checkpoint` is told; older checkpoints are deleted once it returns.
    """
    hooks = hooks or TrainingHooks()
    total = spec.params.num_boost_round
    if start_round and (checkpoint is None or not checkpoint.is_file()):
        raise FileNotFoundError(f"checkpoint for round {start_round} is missing: {checkpoint}")
    intervals = spec.intervals
    features, labels, days = read_training_rows(
        spec.dataset_url, spec.features, spec.label, intervals.date_column if intervals else None
    )
    params = lightgbm_params(spec.params)
    done = start_round
    while done < total:
        chunk_end = min((done // spec.checkpoint_every + 1) * spec.checkpoint_every, total)
        booster = lgb.train(
            params,
            lgb.Dataset(features, label=labels, feature_name=spec.features, free_raw_data=False),
            num_boost_round=chunk_end - done,
            init_model=str(checkpoint) if checkpoint else None,
            callbacks=_callbacks(hooks),
        )
        previous, checkpoint = checkpoint, checkpoint_file(job_dir, chunk_end)
        _save_atomically(booster, checkpoint)
        hooks.on_checkpoint(chunk_end, checkpoint)
        if previous is not None and previous != checkpoint:
            previous.unlink(missing_ok=True)
        done = chunk_end
    if checkpoint is None:  # total rounds is at least 1, so only a start past the end gets here
        raise ValueError(f"nothing to train: start round {start_round} of {total}")
    model_path = job_dir / MODEL_FILE
    data = checkpoint.read_bytes()
    _write_atomically(model_path, data)
    metrics = _metrics(lgb.Booster(model_file=str(model_path)), features, labels, total)
    if intervals is not None and days is not None:
        metrics |= conformal_intervals(
            features,
            labels,
            days,
            params,
            total,
            intervals.levels,
            intervals.windows,
            intervals.window_days,
            intervals.scale,
        ).as_metrics()
    return TrainingResult(model_path, hashlib.sha256(data).hexdigest(), len(data), metrics)


def _callbacks(hooks: TrainingHooks) -> list[Callable[[lgb.callback.CallbackEnv], None]]:
    """Wrap the hooks as LightGBM callbacks; `env.iteration` counts from 0 across chunks."""

    def before(env: lgb.callback.CallbackEnv) -> None:
        hooks.before_round(env.iteration + 1)

    def after(env: lgb.callback.CallbackEnv) -> None:
        hooks.after_round(env.iteration + 1)

    before.before_iteration = True  # type: ignore[attr-defined]
    return [before, after]


def _save_atomically(booster: lgb.Booster, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    booster.save_model(str(partial))
    os.replace(partial, path)


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def _metrics(
    booster: lgb.Booster, features: np.ndarray, labels: np.ndarray, rounds: int
) -> dict[str, float]:
    """Score the final model on its training rows (the platform's gate does the real holdout)."""
    predictions = np.asarray(booster.predict(features), dtype="float64")
    errors = labels - predictions
    metrics = {
        "rows": float(len(labels)),
        "rounds": float(rounds),
        "train_rmse": float(np.sqrt(np.mean(errors**2))),
        "train_mae": float(np.mean(np.abs(errors))),
    }
    volume = float(np.sum(np.abs(labels)))
    if volume > 0:  # WAPE is undefined for an all-zero label; leave it out rather than inf
        metrics["train_wape"] = float(np.sum(np.abs(errors)) / volume)
    return metrics
