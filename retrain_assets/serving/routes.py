"""The route table: who serves what for each customer, read from `serving_routes`.

The rollout writes `serving_routes` (docs/deployment.md); the service only reads it. A
background refresher reads the rows changed since its last look every few seconds, and a
route that names a version not yet in memory is switched only after that version has loaded:
requests keep the old route until then, so none of them waits on (or fails with) a move. A
version that cannot be loaded leaves the old route in place and is tried again next refresh.

"Changed since" is `updated_at` later than the newest one seen, less a margin: a transaction
that stamped its row earlier but committed later still shows up in the next reads. Every
`FULL_READ_EVERY` refreshes the whole table is read again, which also drops the routes of
rows that were deleted.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import psycopg2
import psycopg2.extensions

from retrain_assets.serving.table_watch import TableWatch

log = logging.getLogger(__name__)

OVERLAP = dt.timedelta(seconds=30)
FULL_READ_EVERY = 30

_COLUMNS = "customer, champion_version, canary_version, canary_weight, rollout_id, step, updated_at"


@dataclass(frozen=True)
class Route:
    """One customer's row of `serving_routes`."""

    customer: str
    champion_version: str | None
    canary_version: str | None
    canary_weight: float
    rollout_id: int | None
    step: str | None
    updated_at: dt.datetime

    def versions(self) -> list[str]:
        """Return the versions this route serves: the champion's, then the canary's."""
        return [v for v in (self.champion_version, self.canary_version) if v is not None]

    def same_serving(self, other: Route | None) -> bool:
        """Return whether `other` serves the same way (only `updated_at` may differ)."""
        return other is not None and replace(other, updated_at=self.updated_at) == self


def read_routes(conn: psycopg2.extensions.connection, since: dt.datetime | None) -> list[Route]:
    """Return the rows of `serving_routes` updated after `since` (every row when None)."""
    with conn.cursor() as cur:
        if since is None:
            cur.execute(f"SELECT {_COLUMNS} FROM serving_routes")
        else:
            cur.execute(f"SELECT {_COLUMNS} FROM serving_routes WHERE updated_at > %s", (since,))
        rows = cur.fetchall()
    return [
        Route(
            customer=row[0],
            champion_version=row[1],
            canary_version=row[2],
            canary_weight=float(row[3]),
            rollout_id=row[4],
            step=row[5],
            updated_at=row[6],
        )
        for row in rows
    ]


class RouteTable:
    """The routes requests are answered with; a lookup takes no lock."""

    def __init__(self) -> None:
        """Start empty; `loaded` turns true once the whole table has been read."""
        self._routes: dict[str, Route] = {}
        self.loaded = False

    def get(self, customer: str) -> Route | None:
        """Return the customer's route, None when `serving_routes` has no row for it."""
        return self._routes.get(customer)

    def put(self, route: Route) -> None:
        """Install one route (a single dict assignment: readers see the old or the new one)."""
        self._routes[route.customer] = route

    def keep_only(self, customers: Iterable[str]) -> None:
        """Drop the routes of every customer not in `customers` (rows deleted from the table)."""
        wanted = set(customers)
        for customer in [c for c in self._routes if c not in wanted]:
            self._routes.pop(customer, None)

    def customers(self) -> list[str]:
        """Return every customer with a route, sorted."""
        return sorted(self._routes)


class RouteRefresher(TableWatch):
    """Keeps a RouteTable up to date from Postgres in a background thread."""

    def __init__(
        self,
        url: str,
        table: RouteTable,
        preload: Callable[[Route], None],
        interval: float,
    ) -> None:
        """Read `serving_routes` at `url` every `interval` s; `preload(route)` loads its models.

        `preload` raises when a version cannot be loaded; the route then waits.
        """
        super().__init__(url, interval, "serving_routes")
        self.table = table
        self.preload = preload
        self._watermark: dt.datetime | None = None
        self._reads = 0
        self._pending: dict[str, Route] = {}
        self._failed: dict[str, str] = {}

    # -- one refresh ----------------------------------------------------------------------

    def refresh(self) -> None:
        """Read changed rows (or all of them) and install the routes whose models are loaded.

        Raises:
            psycopg2.Error: Postgres did not answer (the connection is dropped and remade on
                the next refresh).
        """
        full = not self.table.loaded or self._reads % FULL_READ_EVERY == 0
        since = None if full or self._watermark is None else self._watermark - OVERLAP
        try:
            routes = read_routes(self._connection(), since)
        except psycopg2.Error:
            self._close()
            raise
        self._reads += 1
        for route in routes:
            if self._watermark is None or route.updated_at > self._watermark:
                self._watermark = route.updated_at
        if not self.table.loaded:
            for route in routes:  # nothing is served yet: no request can wait on a move
                self.table.put(route)
            self.table.loaded = True
            return
        for route in routes:
            waiting = self._pending.get(route.customer)
            if waiting is None or route.updated_at >= waiting.updated_at:
                self._pending[route.customer] = route
        if full:
            present = {route.customer for route in routes}
            self.table.keep_only(present)
            self._pending = {c: r for c, r in self._pending.items() if c in present}
        self._install_pending()

    def _install_pending(self) -> None:
        for customer, route in list(self._pending.items()):
            current = self.table.get(customer)
            if route.same_serving(current) or (
                current is not None and current.versions() == route.versions()
            ):
                self.table.put(route)  # same models: nothing to load
                del self._pending[customer]
                continue
            try:
                self.preload(route)
            except Exception as error:  # any load failure keeps the old route, retried next time
                reason = f"{type(error).__name__}: {error}"
                if self._failed.get(customer) != reason:
                    log.warning(
                        "route of %s (versions %s) waits: a version did not load: %s",
                        customer,
                        ", ".join(route.versions()) or "none",
                        reason,
                    )
                self._failed[customer] = reason
                continue
            self.table.put(route)
            del self._pending[customer]
            if self._failed.pop(customer, None) is not None:
                log.info("route of %s installed after its versions loaded", customer)

    def pending(self) -> list[str]:
        """Return the customers whose newest route waits for a version to load."""
        return sorted(self._pending)

    def healthy(self) -> bool:
        """Return whether the table has been read and the latest read succeeded."""
        return self.table.loaded and self.last_error is None
