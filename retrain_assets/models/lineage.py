"""Lineage between the model-side assets, read from Dagster's event log.

The model side has no data edges (the snapshot comes from a decision, not from the graph), so
the gate and the registry learn which run key a customer's candidate is from the metadata the
earlier steps recorded on their materializations.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg

RUN_KEY = "run_key"
_SCAN = 50  # materializations of one partition looked at when searching for a run key


def metadata_text(value: object) -> str | None:
    """Return a metadata entry as text (MetadataValue or raw), None when absent."""
    if value is None:
        return None
    inner = getattr(value, "value", value)
    return None if inner is None else str(inner)


def materializations(
    instance: dg.DagsterInstance, key: dg.AssetKey, customer: str, limit: int = _SCAN
) -> Iterator[dg.AssetMaterialization]:
    """Yield a customer partition's materializations of an asset, newest first."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[customer]), limit=limit
    ).records
    for record in records:
        if record.asset_materialization is not None:
            yield record.asset_materialization


def latest_run_key(instance: dg.DagsterInstance, key: dg.AssetKey, customer: str) -> str:
    """Return the run key of the customer's latest materialization of `key`.

    Raises:
        LookupError: the partition was never materialized, or without a run key.
    """
    for materialization in materializations(instance, key, customer, limit=1):
        run_key = metadata_text(materialization.metadata.get(RUN_KEY))
        if run_key:
            return run_key
        raise LookupError(f"{key.to_user_string()} [{customer}] was recorded without a run key")
    raise LookupError(f"{key.to_user_string()} was never materialized for {customer}")


def metadata_for_run_key(
    instance: dg.DagsterInstance, key: dg.AssetKey, customer: str, run_key: str
) -> dict[str, object]:
    """Return the metadata of the newest materialization of `key` for this run key, or {}."""
    for materialization in materializations(instance, key, customer):
        if metadata_text(materialization.metadata.get(RUN_KEY)) == run_key:
            return {
                name: getattr(value, "value", value)
                for name, value in materialization.metadata.items()
            }
    return {}
