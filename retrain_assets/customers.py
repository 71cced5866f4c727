"""Customers: the tenants, each a dynamic partition of the model side.

A customer name becomes a folder name, a partition key, a tag value and part of a registry
name, so it must be a safe slug; anything else is refused with the reason. The rule itself is
in `retrain_assets.customer_names` (free of Dagster, for the GPU service); this module adds
what Dagster code needs: the partitions definition and the checks of a partition key.
"""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg

from retrain_assets.customer_names import (
    CUSTOMER_NAME_RULE,
    InvalidCustomerName,
    is_safe_customer_name,
    validate_customer_name,
)

# The partitions' name, for the instance's dynamic-partition calls (CUSTOMERS.name is
# `str | None` to a type checker, as a DynamicPartitionsDefinition may be unnamed).
CUSTOMER_PARTITIONS = "customers"
CUSTOMERS = dg.DynamicPartitionsDefinition(name=CUSTOMER_PARTITIONS)

__all__ = [
    "CUSTOMERS",
    "CUSTOMER_NAME_RULE",
    "CUSTOMER_PARTITIONS",
    "InvalidCustomerName",
    "UnsafeCustomerPartition",
    "customer_of",
    "refused_partition_message",
    "split_customer_partitions",
    "validate_customer_name",
]

_REMEDY = (
    "delete this partition from the `customers` partitions in the Dagster UI and add the "
    "customer again with `retrain-assets customers add NAME`"
)

PartitionedContext = (
    dg.AssetExecutionContext | dg.AssetCheckExecutionContext | dg.OpExecutionContext
)


class UnsafeCustomerPartition(dg.Failure):
    """A `customers` partition key that is not a safe customer name (added by hand)."""


def customer_of(context: PartitionedContext) -> str:
    """Return the run's customer partition key, after checking it is a safe customer name.

    Every asset, check and op partitioned by customer calls this first, before the key
    becomes a path, a query or a registry name: the UI's "add partition" accepts any string.

    Raises:
        UnsafeCustomerPartition: the key breaks the rule; names the key and the rule.
    """
    key = context.partition_key
    try:
        return validate_customer_name(key)
    except InvalidCustomerName as error:
        raise UnsafeCustomerPartition(
            description=f"refusing customers partition {key[:60]!r}: {error}; {_REMEDY}",
            metadata={"partition_key": repr(key[:200]), "rule": CUSTOMER_NAME_RULE},
        ) from error


def split_customer_partitions(keys: Iterable[str]) -> tuple[list[str], list[str]]:
    """Return (safe customer names, refused keys), each sorted, from `customers` partition keys.

    Code that enumerates every customer (the `sales` asset, the retraining policy) reads
    only the safe ones and reports the others.
    """
    safe: list[str] = []
    refused: list[str] = []
    for key in sorted(keys):
        (safe if is_safe_customer_name(key) else refused).append(key)
    return safe, refused


def refused_partition_message(key: str) -> str:
    """Return one line saying why a `customers` partition key is skipped, and what to do."""
    try:
        validate_customer_name(key)
    except InvalidCustomerName as error:
        return f"customers partition {key[:60]!r} skipped: {error}; {_REMEDY}"
    return f"customers partition {key!r} is a safe name"
