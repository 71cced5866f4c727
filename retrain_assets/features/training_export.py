"""Exporting one customer's rows of a snapshot for the GPU service, holdout days kept apart.

The latest `holdout_days` days are never sent to training: the evaluation gate scores the
candidate and the champion on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from upath import UPath

from retrain_assets.asset_keys import STORE_DAY_FEATURES, name_of
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.store.snapshot_ref import SnapshotRef

MODEL_FEATURES = [
    "lag_7",
    "lag_14",
    "lag_28",
    "rolling_mean_7",
    "rolling_mean_28",
    "day_of_week",
    "is_holiday",
    "on_promo",
    "price",
]
LABEL = "units_sold"


def export_folder(store: ParquetPartitionStore, customer: str, run_key: str) -> UPath:
    """Return where a run key's exported rows live (the gate reads the holdout from here)."""
    return store.base / "training_exports" / customer / run_key


def read_holdout(store: ParquetPartitionStore, customer: str, run_key: str) -> pd.DataFrame:
    """Return the holdout rows exported for a run key.

    Raises:
        FileNotFoundError: the run key was never exported.
    """
    return read_export_part(store, customer, run_key, "holdout")


def read_export_part(
    store: ParquetPartitionStore,
    customer: str,
    run_key: str,
    part: str,
    columns: list[str] | None = None,
) -> pd.DataFrame:
    """Return a run key's exported `train` or `holdout` rows (only `columns`, when given).

    Raises:
        FileNotFoundError: the run key was never exported.
    """
    path = export_folder(store, customer, run_key) / f"{part}.parquet"
    if not path.exists():
        raise FileNotFoundError(f"no {part} exported for run {run_key} of {customer} at {path}")
    with path.open("rb") as handle:
        return pd.read_parquet(handle, columns=columns)


def customer_rows(store: ParquetPartitionStore, customer: str, ref: SnapshotRef) -> pd.DataFrame:
    """Return the customer's rows of the snapshot's days (every feature column)."""
    frame = store.read(name_of(STORE_DAY_FEATURES), sorted(ref.data_versions))
    return frame[frame["customer"] == customer]


@dataclass(frozen=True)
class Export:
    """Where the exported rows are, and how many of each."""

    train_path: str
    holdout_path: str
    train_rows: int
    holdout_rows: int


def export_customer(
    store: ParquetPartitionStore,
    customer: str,
    ref: SnapshotRef,
    holdout_days: int,
    destination: UPath,
    frame: pd.DataFrame | None = None,
) -> Export:
    """Write the customer's training and holdout rows as Parquet under `destination`.

    `frame`: the customer's rows of the snapshot if the caller read them (`customer_rows`).

    Raises:
        ValueError: the range has no rows for the customer, or is too short for the holdout.
    """
    days = sorted(ref.data_versions)
    if len(days) <= holdout_days:
        raise ValueError(
            f"snapshot {days[0]} .. {days[-1]} has {len(days)} day(s); it needs more than the "
            f"{holdout_days} holdout day(s)"
        )
    if frame is None:
        frame = customer_rows(store, customer, ref)
    if frame.empty:
        raise ValueError(f"snapshot {days[0]} .. {days[-1]} has no rows for {customer}")
    columns = ["customer", "store_id", "item_id", "date", *MODEL_FEATURES, LABEL]
    frame = frame[columns].astype({"is_holiday": "int8", "on_promo": "int8"})
    holdout_start = pd.Timestamp(days[-holdout_days])
    train, holdout = frame[frame["date"] < holdout_start], frame[frame["date"] >= holdout_start]
    target = UPath(destination)
    target.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, part in (("train", train), ("holdout", holdout)):
        paths[name] = target / f"{name}.parquet"
        with paths[name].open("wb") as handle:
            part.reset_index(drop=True).to_parquet(handle, index=False)
    return Export(str(paths["train"]), str(paths["holdout"]), len(train), len(holdout))
