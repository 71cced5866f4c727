"""The GPU service's own tables (database purpose `gpu`), created by numbered migrations.

Append a new entry to MIGRATIONS to change the schema; never edit one that has shipped. The
service's database is separate from the platform's, so the service could move to another
machine with its data and nothing in `retrain_app` would notice.
"""

from __future__ import annotations

from retrain_assets.store.migrations import apply_migrations

MIGRATIONS: list[str] = [
    # 1: jobs (one row per idempotency key) and runs (one row per worker process that ran one).
    """
    CREATE TABLE jobs (
        id                      text PRIMARY KEY,
        idempotency_key         text NOT NULL UNIQUE,
        spec                    jsonb NOT NULL,
        spec_canonical          text NOT NULL,
        customer                text NOT NULL,
        status                  text NOT NULL CHECK (status IN
                                    ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
        attempt                 integer NOT NULL DEFAULT 1,
        rounds_done             integer NOT NULL DEFAULT 0,
        total_rounds            integer NOT NULL,
        last_checkpoint_round   integer,
        checkpoint_path         text,
        error                   text,
        cancel_requested        boolean NOT NULL DEFAULT false,
        run_token               text,
        worker_pid              integer,
        artifact_path           text,
        artifact_sha256         text,
        artifact_size           bigint,
        metrics                 jsonb,
        created_at              timestamptz NOT NULL DEFAULT now(),
        updated_at              timestamptz NOT NULL DEFAULT now(),
        queued_at               timestamptz NOT NULL DEFAULT now(),
        finished_at             timestamptz
    );
    CREATE INDEX jobs_queue ON jobs (queued_at, id) WHERE status = 'queued';
    CREATE TABLE job_runs (
        id                  bigserial PRIMARY KEY,
        job_id              text NOT NULL REFERENCES jobs (id),
        attempt             integer NOT NULL,
        run_token           text NOT NULL UNIQUE,
        started_from_round  integer NOT NULL,
        worker_pid          integer,
        started_at          timestamptz NOT NULL DEFAULT now(),
        ended_at            timestamptz,
        outcome             text CHECK (outcome IN
                                ('succeeded', 'failed', 'cancelled', 'crashed', 'interrupted')),
        error               text,
        exit_code           integer
    );
    CREATE INDEX job_runs_job ON job_runs (job_id, id);
    """,
]

_LOCK_ID = 7_231_101  # pg_advisory_xact_lock key: one migrator at a time


def migrate(url: str) -> int:
    """Bring the GPU service's tables up to date; return the schema version."""
    return apply_migrations(url, MIGRATIONS, _LOCK_ID)
