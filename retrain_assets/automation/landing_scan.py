"""What is in the landing zone right now: one listing per customer folder, never one per day.

Each daily file is reduced to a stamp (size and modification time, or the object's ETag on
object storage) that changes when the file is replaced, so a late or corrected file is seen
without reading it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import fsspec

SUFFIX = ".csv"
_MODIFIED_KEYS = ("mtime", "LastModified", "last_modified", "updated", "created")


@dataclass(frozen=True)
class LandedFile:
    """One customer's file for one day, as the listing shows it."""

    customer: str
    day: dt.date
    stamp: str
    modified: float | None


def _modified(entry: dict[str, Any]) -> float | None:
    """Return the entry's modification time in epoch seconds, whatever the filesystem calls it."""
    for key in _MODIFIED_KEYS:
        value = entry.get(key)
        if isinstance(value, dt.datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return dt.datetime.fromisoformat(value).timestamp()
            except ValueError:
                continue
    return None


def _day(name: str) -> dt.date | None:
    if not name.endswith(SUFFIX):
        return None
    try:
        return dt.date.fromisoformat(name.removesuffix(SUFFIX))
    except ValueError:
        return None  # not a daily file (the sales asset reports files it expects, not extras)


def scan_landing(landing_root: str, customers: Iterable[str]) -> list[LandedFile]:
    """Return every daily file of the given customers: one folder listing per customer.

    Cached listings are dropped first: object-storage filesystems keep them per process, and
    a sensor's process lives for many ticks.
    """
    fs, base = fsspec.core.url_to_fs(landing_root)
    fs.invalidate_cache()
    files: list[LandedFile] = []
    for customer in customers:
        try:
            entries = fs.ls(f"{base.rstrip('/')}/{customer}", detail=True)
        except FileNotFoundError:
            continue  # a customer added by hand before its first delivery
        for entry in entries:
            day = _day(str(entry["name"]).rstrip("/").rsplit("/", 1)[-1])
            if day is None or entry.get("type") == "directory":
                continue
            modified = _modified(entry)
            version = entry.get("ETag") or entry.get("etag") or modified
            files.append(LandedFile(customer, day, f"{entry.get('size')}:{version}", modified))
    return files
