"""The project's own tables, created by numbered migrations applied exactly once.

Append a new entry to MIGRATIONS to change the schema; never edit one that has shipped.
"""

from __future__ import annotations

from retrain_assets.store.database import transaction

MIGRATIONS: list[str] = [
    # 1: customers, landing-file outcomes and feature snapshot records.
    """
    CREATE TABLE customers (
        name        text PRIMARY KEY,
        country     text,
        added_by    text NOT NULL,
        added_at    timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE quarantined_rows (
        id              bigserial PRIMARY KEY,
        partition_date  date NOT NULL,
        customer        text NOT NULL,
        file            text NOT NULL,
        line            integer NOT NULL,
        reason          text NOT NULL,
        raw             jsonb NOT NULL,
        run_id          text NOT NULL,
        quarantined_at  timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX quarantined_rows_day ON quarantined_rows (partition_date, customer);
    CREATE TABLE landing_file_problems (
        id              bigserial PRIMARY KEY,
        partition_date  date NOT NULL,
        customer        text NOT NULL,
        file            text NOT NULL,
        severity        text NOT NULL CHECK (severity IN ('error', 'warning')),
        reason          text NOT NULL,
        run_id          text NOT NULL,
        recorded_at     timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX landing_file_problems_day ON landing_file_problems (partition_date, customer);
    CREATE TABLE feature_snapshots (
        id                  bigserial PRIMARY KEY,
        partition_date      date NOT NULL,
        data_version        text NOT NULL,
        feature_version     text NOT NULL,
        rows_per_customer   jsonb NOT NULL,
        from_backfill       boolean NOT NULL,
        backfill_id         text,
        run_id              text NOT NULL,
        published_at        timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX feature_snapshots_day ON feature_snapshots (partition_date, published_at DESC);
    """,
]

_LOCK_ID = 7_231_001  # pg_advisory_xact_lock key: one migrator at a time


def migrate(url: str) -> int:
    """Apply pending migrations under an advisory lock; return the schema version."""
    with transaction(url) as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
        cur.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY)")
        cur.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
        current = cur.fetchone()[0]
        for version, statement in enumerate(MIGRATIONS, start=1):
            if version > current:
                cur.execute(statement)
                cur.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
    return len(MIGRATIONS)
