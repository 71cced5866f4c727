"""Daily-partitioned Parquet files on a UPath (a local folder or object storage).

Dagster's UPathIOManager refuses an output that spans several partitions, but a single-run
backfill hands one frame for a whole range to the IO manager. This store splits by the `date`
column instead: one file per asset and day, `<base>/<asset>/<YYYY-MM-DD>.parquet`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import dagster as dg
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field
from upath import UPath

from retrain_assets.settings import storage_root

SUFFIX = ".parquet"
# Metadata on an `AssetIn`: the consuming asset checks which upstream days exist itself (the
# IO manager then loads the days that exist instead of failing on the first missing one).
CONSUMER_CHECKS_MISSING_DAYS = "retrain/consumer_checks_missing_days"
# Metadata on an `AssetIn`: these text columns are loaded as pandas categoricals (each distinct
# text once, rows as integer codes): 29 days of a million series are 29 million rows.
CATEGORY_COLUMNS = "retrain/category_columns"


def rows_by_day(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Return the positions of each day's rows (by the `date` column), in frame order.

    One pass over the column, not one comparison of every row per day: a year of 10,000 series
    is 3.65 million rows and 365 days.
    """
    if not len(frame):
        return {}
    days = frame["date"].to_numpy().astype("datetime64[D]")
    distinct, inverse = np.unique(days, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse, minlength=len(distinct)))[:-1]
    keys = np.datetime_as_string(distinct, unit="D").tolist()
    return dict(zip(keys, np.split(order, bounds), strict=True))


class MissingPartitionError(FileNotFoundError):
    """An upstream day has no file: it was never materialized."""


class ParquetPartitionStore:
    """Reads and writes one Parquet file per (asset, day)."""

    def __init__(self, base_url: str) -> None:
        """Keep the base URL; nothing is touched until a read or a write."""
        self.base = UPath(base_url)

    def path(self, asset: str, partition_key: str) -> UPath:
        """Return where one asset's day lives."""
        return self.base / asset / f"{partition_key}.parquet"

    def write(self, asset: str, partition_key: str, frame: pd.DataFrame) -> UPath:
        """Write one day (an empty frame too: an empty day is still a materialized day).

        On a local disk the file is written under a temporary name and renamed, so a run
        reading the day while another run rewrites it (the landing automation and a person's
        backfill) sees the old file or the new one, never half of one. Object storage
        replaces an object in one step by itself.
        """
        target = self.path(asset, partition_key)
        target.parent.mkdir(parents=True, exist_ok=True)
        local = target.protocol in ("", "file", "local")
        written = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp") if local else target
        with written.open("wb") as handle:
            frame.reset_index(drop=True).to_parquet(handle, index=False)
        if local:
            written.rename(target)
        return target

    def present_days(self, asset: str) -> list[str]:
        """Return the days of `asset` that have a file, oldest first (one folder listing)."""
        folder = self.base / asset
        if not folder.exists():
            return []
        return sorted(
            path.name.removesuffix(SUFFIX)
            for path in folder.iterdir()
            if path.name.endswith(SUFFIX) and not path.name.startswith(".")
        )

    def write_days(
        self, asset: str, partition_keys: Sequence[str], frame: pd.DataFrame
    ) -> dict[str, pd.DataFrame]:
        """Split `frame` by its `date` column and write every key; return the slices."""
        positions = rows_by_day(frame)
        stray = sorted(set(positions) - set(partition_keys))
        if stray:
            raise ValueError(f"{asset}: rows dated outside the partitions written: {stray[:5]}")
        nothing = np.zeros(0, dtype=np.int64)
        slices = {key: frame.iloc[positions.get(key, nothing)] for key in partition_keys}
        for key, part in slices.items():
            self.write(asset, key, part)
        return slices

    def read(
        self, asset: str, partition_keys: Sequence[str], categories: Sequence[str] = ()
    ) -> pd.DataFrame:
        """Read and concatenate days; a missing day is an error naming the days to build.

        `categories` names text columns to load as categoricals (the same values, far less
        memory and far faster to group by).
        """
        missing = [key for key in partition_keys if not self.path(asset, key).exists()]
        if missing:
            raise MissingPartitionError(
                f"{asset} has no data for {len(missing)} day(s) ({missing[0]} .. {missing[-1]}) "
                f"under {self.base / asset}; materialize those partitions of {asset} first"
            )
        if categories:
            frame = self._read_categories(asset, partition_keys, list(categories))
            if frame is not None:
                return frame
        frames = []
        for key in partition_keys:
            with self.path(asset, key).open("rb") as handle:
                frames.append(pd.read_parquet(handle))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def _read_categories(
        self, asset: str, partition_keys: Sequence[str], categories: list[str]
    ) -> pd.DataFrame | None:
        """Read the days in one Arrow table, `categories` dictionary-encoded; None if all empty.

        Empty days are left out (their text columns have no type to unify with the others).
        """
        tables = []
        for key in partition_keys:
            with self.path(asset, key).open("rb") as handle:
                table = pq.read_table(handle, read_dictionary=categories)
            if table.num_rows:
                tables.append(table)
        if not tables:
            return None
        return pa.concat_tables(tables).unify_dictionaries().to_pandas()

    def read_present(
        self, asset: str, partition_keys: Sequence[str], categories: Sequence[str] = ()
    ) -> pd.DataFrame:
        """Read the days that have a file and skip the others (the caller checks which)."""
        present = set(self.present_days(asset))
        return self.read(asset, [key for key in partition_keys if key in present], categories)


class PartitionStorage(dg.ConfigurableResource):
    """Where daily partitions live: shared by the IO manager and assets that write per day."""

    base_url: str | None = Field(
        default=None, description="Folder or object-storage URL; default $RETRAIN_STORAGE_URL"
    )

    def root(self) -> str:
        """Return the folder or URL everything of a run is written under (default resolved now).

        The partitions, the training exports and the candidates all live under it: whatever a
        run writes there goes through this resource.
        """
        return self.base_url or storage_root()

    def store(self) -> ParquetPartitionStore:
        """Return the store, resolving the default location when the run starts."""
        return ParquetPartitionStore(self.root())


class DailyParquetIOManager(dg.ConfigurableIOManager):
    """Stores daily-partitioned frames as one Parquet file per day."""

    storage: PartitionStorage

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame) -> None:
        """Write each partition of the run's range as its own file."""
        asset = context.asset_key.to_user_string()
        self.storage.store().write_days(asset, context.asset_partition_keys, obj)

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        """Read every upstream day the partition mapping asks for, as one frame.

        A missing day is an error naming the days to materialize, unless the input's metadata
        says its asset checks the missing days itself (`CONSUMER_CHECKS_MISSING_DAYS`); the
        columns the metadata names under `CATEGORY_COLUMNS` come as categoricals.
        """
        asset = context.asset_key.to_user_string()
        keys = context.asset_partition_keys if context.has_asset_partitions else []
        metadata = context.definition_metadata or {}
        categories = metadata.get(CATEGORY_COLUMNS, ())
        if metadata.get(CONSUMER_CHECKS_MISSING_DAYS):
            return self.storage.store().read_present(asset, keys, categories)
        return self.storage.store().read(asset, keys, categories)
