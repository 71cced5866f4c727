"""Customers: the tenants, each a dynamic partition of the model side.

A customer name becomes a folder name, a partition key, a tag value and part of a registry
name, so it must be a safe slug; anything else is refused with the reason.
"""

from __future__ import annotations

import re

import dagster as dg

CUSTOMERS = dg.DynamicPartitionsDefinition(name="customers")

_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")


class InvalidCustomerName(ValueError):
    """A customer name that is not a safe slug."""


def validate_customer_name(name: str) -> str:
    """Return `name` if it is a safe slug, else raise InvalidCustomerName saying why."""
    if not isinstance(name, str) or not name:
        raise InvalidCustomerName("customer name is empty")
    if len(name) > 40:
        raise InvalidCustomerName(f"customer name {name!r} is {len(name)} characters; at most 40")
    if not _SLUG.match(name):
        raise InvalidCustomerName(
            f"customer name {name!r} is not a safe slug: use lowercase letters, digits and "
            "single hyphens inside, starting and ending with a letter or digit"
        )
    if "--" in name:
        raise InvalidCustomerName(f"customer name {name!r} has a double hyphen")
    return name
