"""What is in the landing zone right now: one listing per customer folder, never one per day.

Each daily file is reduced to a stamp (size and modification time in nanoseconds, or the
object's ETag on object storage) that changes when the file is replaced, so a late or
corrected file is seen without reading it.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache, partial
from typing import Any, NamedTuple

import fsspec
from fsspec.implementations.local import LocalFileSystem

SUFFIX = ".csv"
LISTING_THREADS = 16  # object-storage folders listed at once
Entry = tuple[str, str, float | None]  # file name, stamp, modified (epoch seconds)
_MODIFIED_KEYS = ("mtime", "LastModified", "last_modified", "updated", "created")


class LandedFile(NamedTuple):
    """One customer's file for one day, as the listing shows it (a tuple: millions a tick)."""

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


@lru_cache(maxsize=4096)
def _day(name: str) -> dt.date | None:
    """Return the day a file name stands for (every customer's folder repeats the same names)."""
    if not name.endswith(SUFFIX):
        return None
    try:
        return dt.date.fromisoformat(name.removesuffix(SUFFIX))
    except ValueError:
        return None  # not a daily file (the sales asset reports files it expects, not extras)


def _local_entries(folder: str) -> list[Entry]:
    """Return (name, stamp, modified) of a local folder's files: one `scandir`, in C."""
    entries: list[Entry] = []
    with os.scandir(folder) as listing:
        for entry in listing:
            if entry.is_file():
                info = entry.stat()
                entries.append((entry.name, f"{info.st_size}:{info.st_mtime_ns}", info.st_mtime))
    return entries


def _remote_entries(fs: Any, folder: str) -> list[Entry]:
    """Return (name, stamp, modified) of an object-storage folder's files: one listing."""
    entries = []
    for entry in fs.ls(folder, detail=True):
        if entry.get("type") == "directory":
            continue
        modified = _modified(entry)
        version = entry.get("ETag") or entry.get("etag") or modified
        name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
        entries.append((name, f"{entry.get('size')}:{version}", modified))
    return entries


def scan_landing(landing_root: str, customers: Iterable[str]) -> list[LandedFile]:
    """Return every daily file of the given customers: one folder listing per customer.

    A local landing zone is listed with `os.scandir`; object storage with the filesystem's
    listing, LISTING_THREADS folders at a time (each listing is a round trip), after dropping
    the listings it cached on an earlier tick (the sensor's process lives for many ticks).
    """
    fs, base = fsspec.core.url_to_fs(landing_root)
    base = base.rstrip("/")
    names = list(customers)
    if isinstance(fs, LocalFileSystem):
        listings: Iterable[list[Entry]] = (_listed(_local_entries, f"{base}/{c}") for c in names)
        return _daily_files(names, listings)
    fs.invalidate_cache()
    with ThreadPoolExecutor(max_workers=LISTING_THREADS) as pool:
        listings = pool.map(lambda c: _listed(partial(_remote_entries, fs), f"{base}/{c}"), names)
        return _daily_files(names, listings)


def _listed(list_folder: Callable[[str], list[Entry]], folder: str) -> list[Entry]:
    try:
        return list_folder(folder)
    except FileNotFoundError:
        return []  # a customer added by hand before its first delivery


def _daily_files(names: list[str], listings: Iterable[list[Entry]]) -> list[LandedFile]:
    files = []
    for customer, listing in zip(names, listings, strict=True):
        for name, stamp, modified in listing:
            day = _day(name)
            if day is not None:
                files.append(LandedFile(customer, day, stamp, modified))
    return files
