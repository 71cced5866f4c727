"""Daily-partitioned Parquet files on a UPath (a local folder or object storage).

Dagster's UPathIOManager refuses an output that spans several partitions, but a single-run
backfill hands one frame for a whole range to the IO manager. This store splits by the `date`
column instead: one file per asset and day, `<base>/<asset>/<YYYY-MM-DD>.parquet`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import dagster as dg
import pandas as pd
from pydantic import Field
from upath import UPath

from retrain_assets.settings import storage_root

SUFFIX = ".parquet"
# Metadata on an `AssetIn`: the consuming asset checks which upstream days exist itself (the
# IO manager then loads the days that exist instead of failing on the first missing one).
CONSUMER_CHECKS_MISSING_DAYS = "retrain/consumer_checks_missing_days"


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
        days = frame["date"].dt.strftime("%Y-%m-%d") if len(frame) else pd.Series(dtype=str)
        slices = {key: frame[days == key] for key in partition_keys}
        stray = sorted(set(days) - set(partition_keys))
        if stray:
            raise ValueError(f"{asset}: rows dated outside the partitions written: {stray[:5]}")
        for key, part in slices.items():
            self.write(asset, key, part)
        return slices

    def read(self, asset: str, partition_keys: Sequence[str]) -> pd.DataFrame:
        """Read and concatenate days; a missing day is an error naming the days to build."""
        missing = [key for key in partition_keys if not self.path(asset, key).exists()]
        if missing:
            raise MissingPartitionError(
                f"{asset} has no data for {len(missing)} day(s) ({missing[0]} .. {missing[-1]}) "
                f"under {self.base / asset}; materialize those partitions of {asset} first"
            )
        frames = []
        for key in partition_keys:
            with self.path(asset, key).open("rb") as handle:
                frames.append(pd.read_parquet(handle))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def read_present(self, asset: str, partition_keys: Sequence[str]) -> pd.DataFrame:
        """Read the days that have a file and skip the others (the caller checks which)."""
        present = set(self.present_days(asset))
        return self.read(asset, [key for key in partition_keys if key in present])


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
        says its asset checks the missing days itself (`CONSUMER_CHECKS_MISSING_DAYS`).
        """
        asset = context.asset_key.to_user_string()
        keys = context.asset_partition_keys if context.has_asset_partitions else []
        if (context.definition_metadata or {}).get(CONSUMER_CHECKS_MISSING_DAYS):
            return self.storage.store().read_present(asset, keys)
        return self.storage.store().read(asset, keys)
