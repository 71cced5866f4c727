"""The instance's storage holds its connections and survives a restart (runtime/dagster_storage.py).

dagster-postgres' own class opens a connection per query outside the webserver; the project's
class keeps one per storage. Counted on the session's real PostgreSQL by `pg_stat_database`'s
`sessions` (connections ever opened to the database).
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import psycopg2
import pytest

from retrain_assets.runtime.dagster_storage import (
    PooledPostgresStorage,
    TableCachingEventLogStorage,
)
from retrain_assets.runtime.environment import child_environment, prepare_dagster_home, repo_file
from retrain_assets.store.server import libpq_url
from retrain_assets_tests.support.databases import postgres_storage

EVENTS = 30


def _admin(url: str, statement: str, args: tuple = ()) -> list[tuple]:
    conn = psycopg2.connect(libpq_url(url))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(statement, args)
            return cur.fetchall() if cur.description else []
    finally:
        conn.close()


def _sessions_opened(url: str) -> int:
    """Connections ever opened to the database at `url` (statistics flushed first)."""
    _admin(url, "SELECT pg_stat_force_next_flush()")
    rows = _admin(url, "SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
    return int(rows[0][0])


def _store_events(instance: dg.DagsterInstance, count: int) -> None:
    for n in range(count):
        event = dg.AssetMaterialization("pooled_probe", metadata={"n": n})
        instance.report_runless_asset_event(event)


@pytest.fixture
def pooled_instance(dagster_db: str) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(overrides=postgres_storage(dagster_db)) as instance:
        yield instance


@pytest.fixture
def unpooled_instance(dagster_db: str) -> Iterator[dg.DagsterInstance]:
    """dagster-postgres' own storage class: a new connection for every query."""
    overrides = {"storage": {"postgres": {"postgres_url": dagster_db}}}
    with dg.instance_for_test(overrides=overrides) as instance:
        yield instance


def test_the_repository_instance_uses_the_pooled_storage(
    tmp_path, pg_server, dagster_db, monkeypatch
):
    """An instance from dagster.yaml, as `up` prepares it for the daemon and every run."""
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    environment = child_environment(pg_server, prepare_dagster_home(repo_file("dagster.yaml")))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with dg.DagsterInstance.get() as instance:
        # only PooledPostgresStorage builds this event log
        assert isinstance(instance.event_log_storage, TableCachingEventLogStorage)
        _store_events(instance, 1)


def test_events_are_stored_over_held_connections_not_one_each(
    pooled_instance, unpooled_instance, dagster_db
):
    before = _sessions_opened(dagster_db)
    _store_events(unpooled_instance, EVENTS)  # dagster-postgres' own class: NullPool
    unpooled = _sessions_opened(dagster_db) - before
    before = _sessions_opened(dagster_db)
    _store_events(pooled_instance, EVENTS)
    pooled = _sessions_opened(dagster_db) - before
    assert unpooled >= EVENTS  # at least one connection per event
    assert pooled <= 5, f"{pooled} connections for {EVENTS} events"
    assert len(
        pooled_instance.fetch_materializations(dg.AssetKey("pooled_probe"), 100).records
    ) == (2 * EVENTS)


def test_a_held_connection_ended_by_the_server_is_replaced_before_the_next_event(
    pooled_instance, dagster_db
):
    _store_events(pooled_instance, 1)
    mine = _admin(
        dagster_db,
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid()",
    )
    assert mine, "the storage holds no connection"
    for (pid,) in mine:  # what a PostgreSQL restart does to them
        _admin(dagster_db, "SELECT pg_terminate_backend(%s)", (pid,))
    _store_events(pooled_instance, 1)  # would fail "server closed the connection unexpectedly"
    records = pooled_instance.fetch_materializations(dg.AssetKey("pooled_probe"), 10).records
    assert len(records) == 2


def test_a_table_is_asked_for_until_it_exists_and_then_remembered(pooled_instance, dagster_db):
    storage = pooled_instance.event_log_storage
    assert not storage.has_table("probe_table_made_later")
    _admin(dagster_db, "CREATE TABLE probe_table_made_later (id int)")
    assert storage.has_table("probe_table_made_later")
    _admin(dagster_db, "DROP TABLE probe_table_made_later")
    assert storage.has_table("probe_table_made_later")  # remembered: tables are never dropped


def test_the_storage_is_built_from_the_same_config_as_storage_postgres(dagster_db):
    storage = PooledPostgresStorage.from_config_value(None, {"postgres_url": dagster_db})
    assert storage.postgres_url == dagster_db


def _evaluation(partition: str | None, passed: bool, text: str) -> dg.AssetCheckEvaluation:
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey("deployed_model"),
        check_name="serving_model_fresh",
        passed=passed,
        description=text,
        partition=partition,
    )


def test_dagster_refuses_a_partitions_second_runless_evaluation(pooled_instance, unpooled_instance):
    """Why `serving_model_fresh` is reported inside runs (models/freshness_report.py).

    Both storages are Dagster's own for checks: a partition's second runless evaluation is a
    unique violation, an unpartitioned check's are not. When an upgrade lets the second one in,
    this fails: runless reports would do again.
    """
    for instance, partition in ((unpooled_instance, "acme"), (pooled_instance, "other")):
        instance.report_runless_asset_event(_evaluation(partition, True, "first"))
        with pytest.raises(Exception, match="unique"):
            instance.report_runless_asset_event(_evaluation(partition, False, "second"))
    for text in ("plain 0", "plain 1"):
        pooled_instance.report_runless_asset_event(_evaluation(None, True, text))
    key = dg.AssetCheckKey(dg.AssetKey("deployed_model"), "serving_model_fresh")
    history = pooled_instance.event_log_storage.get_asset_check_execution_history(key, limit=10)
    shown = [(r.partition, r.event.asset_check_evaluation.description) for r in history]
    assert shown == [(None, "plain 1"), (None, "plain 0"), ("other", "first"), ("acme", "first")]
