"""Each customer's served features, held in memory, rebuilt when a day is published.

A request that names only store, item and date is answered from a table built once per
customer and publication: `served_features` (the `store_day_features` code) over the customer's
published rows of the last `HELD_DAYS` days, for every day a client may ask about. A request
is then a dictionary lookup per row, never a Parquet read.

`PublishedDays` reads `feature_snapshots` (which days are published, and each day's data
version). A table built from other versions than the current ones is stale: the refresher
thread rebuilds the tables held (most recently used first) as soon as it sees a new day or a
republished one, and a request that meets a stale table rebuilds it first.

The tables are bounded in bytes (RETRAIN_SERVE_MAX_HISTORY_MB): past the bound the least
recently used customer's table is dropped, and built again when it is next asked for.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import psycopg2
import psycopg2.extensions
import pyarrow.parquet as pq

from retrain_assets.asset_keys import STORE_DAY_FEATURES, name_of
from retrain_assets.features.feature_math import CARRIED
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.served_features import (
    HELD_DAYS,
    HORIZON_DAYS,
    held_days,
    served_days,
    served_features,
)
from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.serving.routing import request_key
from retrain_assets.serving.table_watch import TableWatch

log = logging.getLogger(__name__)

Versions = tuple[tuple[dt.date, str], ...]


class HistoryUnavailable(Exception):
    """The published history cannot be read now (the database or the files); says why."""


@dataclass(frozen=True)
class Publication:
    """The latest published day and the data version of each held day."""

    latest: dt.date
    versions: Versions

    @functools.cached_property
    def first_day(self) -> dt.date:
        """Return the earliest day a client may ask about (once: every row is checked on it)."""
        return served_days(self.latest)[0]

    @functools.cached_property
    def last_day(self) -> dt.date:
        """Return the furthest forecastable day."""
        return self.latest + dt.timedelta(days=HORIZON_DAYS)

    @property
    def next_day(self) -> dt.date:
        """Return the day after the latest published one (a row's date when it gives none)."""
        return self.latest + dt.timedelta(days=1)


def read_publication(conn: psycopg2.extensions.connection) -> Publication | None:
    """Return the latest published day and the held days' versions (None: nothing published)."""
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT DISTINCT ON (partition_date) partition_date, data_version
            FROM feature_snapshots
            WHERE partition_date > (SELECT max(partition_date) FROM feature_snapshots) - %s
            ORDER BY partition_date, published_at DESC, id DESC
            """,
            (HELD_DAYS,),
        )
        rows = cur.fetchall()
    if not rows:
        return None
    return Publication(rows[-1][0], tuple((row[0], row[1]) for row in rows))


@dataclass(frozen=True)
class CustomerFeatures:
    """One customer's features for every (store, item, day) a client may ask about."""

    customer: str
    publication: Publication
    index: dict[str, int]  # request key -> row of `features`
    features: np.ndarray  # rows x MODEL_FEATURES
    published: np.ndarray  # per row: a published day's row (its own price and promotion)
    stores: frozenset[str]
    items: frozenset[str]
    nbytes: int

    @property
    def first_day(self) -> dt.date:
        """Return the earliest day a client may ask about."""
        return self.publication.first_day

    @property
    def last_day(self) -> dt.date:
        """Return the furthest forecastable day."""
        return self.publication.last_day

    @property
    def next_day(self) -> dt.date:
        """Return the day after the latest published one (a row's date when it gives none)."""
        return self.publication.next_day


def _footprint(index: dict[str, int], *arrays: np.ndarray) -> int:
    """Return the bytes a table holds: its arrays, its index and the index's keys."""
    keys = sum(sys.getsizeof(key) for key in index)
    numbers = 32 * len(index)  # an int object each (past the small-int cache) and its slot
    return sys.getsizeof(index) + keys + numbers + sum(a.nbytes for a in arrays)


def build_features(
    customer: str, history: pd.DataFrame, publication: Publication, country: str | None
) -> CustomerFeatures:
    """Return a customer's table from its published rows of the held days."""
    frame = served_features(history, publication.latest, {customer: country})
    stores = frame["store_id"].astype(str).tolist()
    items = frame["item_id"].astype(str).tolist()
    days = frame["date"].dt.strftime("%Y-%m-%d").tolist()
    rows = zip(stores, items, days, strict=True)
    index = {request_key(s, i, d): n for n, (s, i, d) in enumerate(rows)}
    features = frame[MODEL_FEATURES].to_numpy(dtype="float64")
    published = frame["published"].to_numpy(dtype=bool)
    known = history[["store_id", "item_id"]].astype(str)
    return CustomerFeatures(
        customer=customer,
        publication=publication,
        index=index,
        features=features,
        published=published,
        stores=frozenset(known["store_id"]),
        items=frozenset(known["item_id"]),
        nbytes=_footprint(index, features, published),
    )


def _known(publication: Publication | None, read_once: bool) -> Publication:
    """Return the publication, or say why no day is served yet (HistoryUnavailable)."""
    if not read_once:
        raise HistoryUnavailable("feature_snapshots has not been read yet; try again shortly")
    if publication is None:
        raise HistoryUnavailable("no day of store_day_features has been published yet")
    return publication


class ParquetHistory:
    """Reads a customer's published rows of the held days from the partition files."""

    def __init__(self, store: ParquetPartitionStore) -> None:
        """Read `store_day_features` days from `store`."""
        self.store = store

    def __call__(self, customer: str, publication: Publication) -> pd.DataFrame:
        """Return the customer's rows (the CARRIED columns) of the held days that are published.

        Raises:
            HistoryUnavailable: a published day's file cannot be read.
        """
        published = {day for day, _ in publication.versions}
        frames = []
        for day in held_days(publication.latest):
            if day not in published:
                continue
            path = self.store.path(name_of(STORE_DAY_FEATURES), day.isoformat())
            try:
                with path.open("rb") as handle:
                    table = pq.read_table(
                        handle, columns=CARRIED, filters=[("customer", "=", customer)]
                    )
            except (OSError, ValueError) as error:
                raise HistoryUnavailable(
                    f"the published features of {day} cannot be read: {error}"
                ) from error
            if table.num_rows:
                frames.append(table.to_pandas())
        if not frames:
            return pd.DataFrame({column: [] for column in CARRIED})
        return pd.concat(frames, ignore_index=True)


class HistoryCache:
    """The customers' feature tables, least recently used dropped past `max_bytes`."""

    def __init__(
        self,
        read_history: Callable[[str, Publication], pd.DataFrame],
        country: Callable[[str], str | None],
        max_bytes: int,
    ) -> None:
        """Build tables from `read_history(customer, publication)` and `country(customer)`."""
        self.read_history = read_history
        self.country = country
        self.max_bytes = max_bytes
        self.publication: Publication | None = None
        self.read_once = False  # whether `published` was ever called (the first read done)
        self._tables: OrderedDict[str, CustomerFeatures] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[str, threading.Lock] = {}
        self.builds = 0
        self.evictions = 0

    def published(self, publication: Publication | None) -> list[str]:
        """Take the latest publication; return the customers held whose tables are now stale."""
        with self._lock:
            self.publication = publication
            self.read_once = True
            return [c for c, t in reversed(self._tables.items()) if t.publication != publication]

    def current(self) -> Publication:
        """Return the latest publication: which days are served, for every form of request.

        Raises:
            HistoryUnavailable: feature_snapshots not read yet, or nothing published yet.
        """
        with self._lock:
            publication, read_once = self.publication, self.read_once
        return _known(publication, read_once)

    def get(self, customer: str) -> CustomerFeatures:
        """Return the customer's current table, built now when missing or stale.

        Raises:
            HistoryUnavailable: nothing is published yet, or the history cannot be read.
        """
        with self._lock:
            publication = self.publication
            table = self._tables.get(customer)
            if table is not None and table.publication == publication:
                self._tables.move_to_end(customer)
                return table
            builder = self._building.setdefault(customer, threading.Lock())
        publication = _known(publication, self.read_once)
        with builder:  # one build per customer at a time; the others wait for it
            with self._lock:
                table = self._tables.get(customer)
                if table is not None and table.publication == publication:
                    return table
            return self.build(customer, publication)

    def build(self, customer: str, publication: Publication) -> CustomerFeatures:
        """Build and hold the customer's table for `publication` (evicting past the bound)."""
        history = self.read_history(customer, publication)
        table = build_features(customer, history, publication, self.country(customer))
        with self._lock:
            self.builds += 1
            self._tables[customer] = table
            self._tables.move_to_end(customer)
            while len(self._tables) > 1 and self.held_bytes() > self.max_bytes:
                evicted, _ = self._tables.popitem(last=False)
                self.evictions += 1
                log.info("history of %s dropped: over the memory bound", evicted)
        return table

    def refresh(self, customers: list[str]) -> None:
        """Rebuild the tables of `customers` for the current publication (stale ones only)."""
        for customer in customers:
            try:
                self.get(customer)
            except HistoryUnavailable as error:
                log.warning("history of %s not rebuilt: %s", customer, error)

    def held_bytes(self) -> int:
        """Return the bytes the held tables take (callers hold the lock or accept a race)."""
        return sum(t.nbytes for t in self._tables.values())

    def held(self) -> list[str]:
        """Return the customers held, least recently used first."""
        with self._lock:
            return list(self._tables)


class PublicationWatcher(TableWatch):
    """Reads `feature_snapshots` every `interval` s; a change rebuilds the tables held."""

    def __init__(self, url: str, cache: HistoryCache, interval: float) -> None:
        """Watch the project database at `url` for `cache`."""
        super().__init__(url, interval, "feature_snapshots")
        self.cache = cache

    def refresh(self) -> None:
        """Read the publication once; rebuild the held tables it made stale.

        Raises:
            psycopg2.Error: Postgres did not answer.
        """
        try:
            publication = read_publication(self._connection())
        except psycopg2.Error:
            self._close()
            raise
        if publication != self.cache.publication or not self.cache.read_once:
            stale = self.cache.published(publication)
            if publication is not None:
                log.info(
                    "published features up to %s: rebuilding %d held",
                    publication.latest,
                    len(stale),
                )
            self.cache.refresh(stale)
