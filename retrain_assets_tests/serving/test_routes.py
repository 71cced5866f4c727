import psycopg2
import pytest

from retrain_assets.serving import routes as routes_module
from retrain_assets.serving.routes import Route, RouteRefresher, RouteTable
from retrain_assets.store.database import transaction
from retrain_assets.store.server import with_database
from retrain_assets_tests.support.waiting import wait_until


def set_route(url, customer, champion, canary=None, weight=0.0, step=None, age_seconds=0):
    with transaction(url) as cur:
        cur.execute(
            "INSERT INTO serving_routes (customer, champion_version, canary_version, "
            "canary_weight, rollout_id, step, updated_at) "
            "VALUES (%s, %s, %s, %s, 1, %s, clock_timestamp() - %s * interval '1 second') "
            "ON CONFLICT (customer) DO UPDATE SET champion_version = EXCLUDED.champion_version, "
            "canary_version = EXCLUDED.canary_version, canary_weight = EXCLUDED.canary_weight, "
            "step = EXCLUDED.step, updated_at = EXCLUDED.updated_at",
            (customer, champion, canary, weight, step, age_seconds),
        )


class Preloads:
    """Records which routes were preloaded; fails while `failing` is set."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, list[str]]] = []
        self.failing = False

    def __call__(self, route: Route) -> None:
        self.seen.append((route.customer, route.versions()))
        if self.failing:
            raise RuntimeError("MLflow is down")


@pytest.fixture
def table_and_refresher(serving_db):
    table, preloads = RouteTable(), Preloads()
    return table, preloads, RouteRefresher(serving_db, table, preloads, interval=0.05)


def test_the_first_read_installs_every_route_at_once(serving_db, table_and_refresher):
    table, preloads, refresher = table_and_refresher
    set_route(serving_db, "acme", "1")
    set_route(serving_db, "globex", None)
    assert not table.loaded
    refresher.refresh()
    assert table.loaded and table.customers() == ["acme", "globex"]
    assert table.get("acme").champion_version == "1"
    assert table.get("globex").champion_version is None
    assert preloads.seen == []  # nothing was served yet: requests load on demand


def test_a_move_waits_until_its_versions_are_loaded(serving_db, table_and_refresher):
    table, preloads, refresher = table_and_refresher
    set_route(serving_db, "acme", "1")
    refresher.refresh()
    set_route(serving_db, "acme", "1", canary="2", weight=0.1, step="CANARY_10")
    preloads.failing = True
    refresher.refresh()
    assert table.get("acme").canary_version is None  # still the old route
    assert refresher.pending() == ["acme"]
    preloads.failing = False
    refresher.refresh()
    route = table.get("acme")
    assert (route.canary_version, route.canary_weight, route.step) == ("2", 0.1, "CANARY_10")
    assert preloads.seen == [("acme", ["1", "2"]), ("acme", ["1", "2"])]
    assert refresher.pending() == []

    set_route(serving_db, "acme", "1", canary="2", weight=0.5, step="CANARY_50")
    refresher.refresh()
    assert table.get("acme").canary_weight == 0.5
    assert len(preloads.seen) == 2  # same versions, new weight: nothing to load


def test_a_row_committed_after_a_newer_one_is_still_read(serving_db, table_and_refresher):
    table, _, refresher = table_and_refresher
    set_route(serving_db, "acme", "1")
    refresher.refresh()
    set_route(serving_db, "globex", "4", age_seconds=10)  # stamped before acme's row
    refresher.refresh()
    assert table.get("globex").champion_version == "4"


def test_a_full_read_drops_deleted_rows(serving_db, table_and_refresher, monkeypatch):
    table, _, refresher = table_and_refresher
    monkeypatch.setattr(routes_module, "FULL_READ_EVERY", 2)
    set_route(serving_db, "acme", "1")
    set_route(serving_db, "globex", "1")
    refresher.refresh()
    with transaction(serving_db) as cur:
        cur.execute("DELETE FROM serving_routes WHERE customer = 'globex'")
    refresher.refresh()  # read 1: changed rows only
    assert table.get("globex") is not None
    refresher.refresh()  # read 2: the whole table
    assert table.customers() == ["acme"]


def test_the_refresher_thread_reports_an_unreachable_database(serving_db):
    missing = with_database(serving_db, "no_such_database")
    refresher = RouteRefresher(missing, RouteTable(), Preloads(), interval=0.05)
    with pytest.raises(psycopg2.OperationalError):
        refresher.refresh()
    refresher.start()
    try:
        wait_until(lambda: refresher.last_error, 10, "the refresher to report the failure")
        assert "no_such_database" in refresher.last_error
        assert not refresher.healthy()
    finally:
        refresher.stop()


def test_the_refresher_thread_follows_the_table(serving_db, table_and_refresher):
    table, _, refresher = table_and_refresher
    set_route(serving_db, "acme", "1")
    refresher.start()
    try:
        wait_until(refresher.healthy, 10, "the first read", interval=0.05)
        set_route(serving_db, "acme", "2")
        wait_until(lambda: table.get("acme").champion_version == "2", 10, "the move", interval=0.05)
    finally:
        refresher.stop()
