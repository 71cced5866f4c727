"""The one rule for a customer name, checked wherever a name crosses a boundary.

A customer name becomes a folder name, a partition key, a tag value, part of a registry name
and a field of a GPU job, so every entry point (the CLI, the discovery sensor, each asset that
turns a partition key into a path or a query, the GPU service, the registry's names) checks it
with `validate_customer_name`. This module imports nothing heavy: the GPU service and its
worker processes use it without loading Dagster (`retrain_assets.customers` re-exports it).
"""

from __future__ import annotations

import re

MAX_CUSTOMER_NAME = 40
CUSTOMER_NAME_RULE = (
    "a safe slug: lowercase letters, digits and single hyphens inside, starting and ending "
    f"with a letter or digit, at most {MAX_CUSTOMER_NAME} characters"
)
# fullmatch, never match with `^...$`: `$` also matches before a trailing newline.
_SLUG = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")


class InvalidCustomerName(ValueError):
    """A customer name that is not a safe slug."""


def is_safe_customer_name(name: object) -> bool:
    """Return True when `name` is a string that follows CUSTOMER_NAME_RULE."""
    return isinstance(name, str) and _SLUG.fullmatch(name) is not None and "--" not in name


def validate_customer_name(name: object) -> str:
    """Return `name` if it is a safe slug, else raise InvalidCustomerName saying why.

    The message quotes at most the first 40 characters of a refused name, so a huge value is
    never echoed back whole.
    """
    if not isinstance(name, str):
        raise InvalidCustomerName(f"customer name must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidCustomerName("customer name is empty")
    shown = repr(name) if len(name) <= MAX_CUSTOMER_NAME else f"{name[:MAX_CUSTOMER_NAME]!r}..."
    if len(name) > MAX_CUSTOMER_NAME:
        raise InvalidCustomerName(
            f"customer name {shown} is {len(name)} characters; at most {MAX_CUSTOMER_NAME}"
        )
    if "--" in name:
        raise InvalidCustomerName(f"customer name {shown} has a double hyphen")
    if _SLUG.fullmatch(name) is None:
        raise InvalidCustomerName(f"customer name {shown} is not {CUSTOMER_NAME_RULE}")
    return name
