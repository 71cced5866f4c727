"""The project's own tables, created by numbered migrations applied exactly once.

Append a new entry to MIGRATIONS to change the schema; never edit one that has shipped.
"""

from __future__ import annotations

from retrain_assets.store.database import one_row, transaction

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
    # 2: state machines: one pointer per (machine, customer) and an append-only history.
    """
    CREATE TABLE machine_pointers (
        machine     text NOT NULL,
        customer    text NOT NULL,
        run_key     text NOT NULL,
        state       text NOT NULL,
        status      text NOT NULL CHECK (status IN ('ready', 'waiting', 'terminal')),
        payload     jsonb NOT NULL DEFAULT '{}',
        visits      jsonb NOT NULL DEFAULT '{}',
        reason      text,
        last_error  text,
        started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
        updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (machine, customer)
    );
    CREATE INDEX machine_pointers_state ON machine_pointers (machine, state);
    CREATE TABLE machine_history (
        id          bigserial PRIMARY KEY,
        machine     text NOT NULL,
        customer    text NOT NULL,
        run_key     text NOT NULL,
        state       text NOT NULL,
        visit       integer NOT NULL,
        ok          boolean NOT NULL,
        yielded     boolean NOT NULL,
        next_state  text NOT NULL,
        error       text,
        note        text,
        started_at  timestamptz NOT NULL,
        finished_at timestamptz NOT NULL
    );
    CREATE INDEX machine_history_run ON machine_history (machine, customer, run_key, id);
    CREATE FUNCTION machine_history_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'machine_history is append-only';
    END $$;
    CREATE TRIGGER machine_history_append_only BEFORE UPDATE OR DELETE ON machine_history
        FOR EACH ROW EXECUTE FUNCTION machine_history_append_only();
    """,
    # 3: training candidates, one per run key.
    """
    CREATE TABLE model_candidates (
        run_key         text PRIMARY KEY,
        customer        text NOT NULL,
        job_id          text NOT NULL,
        sha256          text NOT NULL,
        path            text NOT NULL,
        metrics         jsonb NOT NULL,
        created_at      timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX model_candidates_customer ON model_candidates (customer, created_at DESC);
    """,
    # 4: the evaluation gate's verdicts, one row per evaluation (a retry evaluates again)
    """
    CREATE TABLE gate_results (
        id              bigserial PRIMARY KEY,
        run_key         text NOT NULL,
        customer        text NOT NULL,
        passed          boolean NOT NULL,
        candidate_wape  double precision,
        reference_wape  double precision,
        reference       text NOT NULL,
        champion_version text,
        margin          double precision NOT NULL,
        holdout_window  text NOT NULL,
        rows_scored     integer NOT NULL,
        reason          text NOT NULL,
        dagster_run_id  text,
        evaluated_at    timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX gate_results_run_key ON gate_results (run_key, id DESC);
    """,
    # 5: the retraining policy: per-customer settings, decisions, drift alerts and baselines.
    """
    CREATE TABLE retraining_settings (
        customer            text PRIMARY KEY,
        schedule_days       integer,
        min_new_rows        integer,
        drift_threshold     double precision,
        min_history_days    integer,
        drift_recent_days   integer,
        window_days         integer,
        updated_by          text NOT NULL,
        updated_at          timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE TABLE retraining_decisions (
        id              bigserial PRIMARY KEY,
        customer        text NOT NULL,
        policy          text NOT NULL CHECK (policy IN ('schedule', 'volume', 'drift', 'manual')),
        reason          text NOT NULL,
        first_day       date NOT NULL,
        last_day        date NOT NULL,
        data_versions   jsonb NOT NULL,
        snapshot_sha    text NOT NULL,
        decided_by      text NOT NULL,
        details         jsonb NOT NULL DEFAULT '{}',
        decided_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
        dagster_run_id  text
    );
    CREATE INDEX retraining_decisions_customer ON retraining_decisions (customer, id DESC);
    CREATE UNIQUE INDEX retraining_decisions_one_open ON retraining_decisions (customer)
        WHERE dagster_run_id IS NULL;
    CREATE TABLE drift_alerts (
        id              bigserial PRIMARY KEY,
        customer        text NOT NULL,
        decision_id     bigint NOT NULL REFERENCES retraining_decisions (id),
        feature         text NOT NULL,
        measure         double precision NOT NULL,
        threshold       double precision NOT NULL,
        recent_first    date NOT NULL,
        recent_last     date NOT NULL,
        detected_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
        resolved_by     bigint REFERENCES retraining_decisions (id)
    );
    CREATE UNIQUE INDEX drift_alerts_one_pending ON drift_alerts (customer)
        WHERE resolved_by IS NULL;
    CREATE TABLE drift_baselines (
        decision_id     bigint PRIMARY KEY REFERENCES retraining_decisions (id),
        stats           jsonb NOT NULL,
        computed_at     timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    """,
    # 6: deployment: who may serve what (routes), what was served (prediction log), the
    # explicit deployment decisions, their rollouts, each step's analysis, and every move of
    # the `champion` alias (the audit matches moves to decisions one to one).
    """
    CREATE TABLE serving_routes (
        customer            text PRIMARY KEY,
        champion_version    text,
        canary_version      text,
        canary_weight       double precision NOT NULL DEFAULT 0
                            CHECK (canary_weight >= 0 AND canary_weight <= 1),
        rollout_id          bigint,
        step                text,
        updated_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
        CHECK (canary_version IS NOT NULL OR canary_weight = 0)
    );
    CREATE INDEX serving_routes_updated ON serving_routes (updated_at);
    CREATE TABLE prediction_log (
        id              bigserial PRIMARY KEY,
        customer        text NOT NULL,
        model_version   text NOT NULL,
        alias           text NOT NULL CHECK (alias IN ('champion', 'canary')),
        served          boolean NOT NULL,
        request_key     text NOT NULL,
        store_id        text NOT NULL,
        item_id         text NOT NULL,
        forecast_date   date NOT NULL,
        prediction      double precision,
        error           text,
        rollout_id      bigint,
        step            text,
        served_at       timestamptz NOT NULL
    );
    CREATE INDEX prediction_log_customer_time ON prediction_log (customer, served_at);
    CREATE INDEX prediction_log_rollout ON prediction_log (rollout_id, step)
        WHERE rollout_id IS NOT NULL;
    CREATE TABLE deployment_settings (
        customer        text PRIMARY KEY,
        auto_deploy     boolean NOT NULL DEFAULT false,
        updated_by      text NOT NULL,
        updated_at      timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE TABLE deployment_decisions (
        id                  bigserial PRIMARY KEY,
        customer            text NOT NULL,
        version             text NOT NULL,
        run_key             text NOT NULL,
        decided_by          text NOT NULL,
        reason              text NOT NULL,
        gate_result_id      bigint NOT NULL REFERENCES gate_results (id),
        previous_champion   text,
        dagster_run_id      text,
        decided_at          timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX deployment_decisions_customer ON deployment_decisions (customer, id DESC);
    CREATE TABLE rollouts (
        id              bigserial PRIMARY KEY,
        decision_id     bigint NOT NULL UNIQUE REFERENCES deployment_decisions (id),
        customer        text NOT NULL,
        version         text NOT NULL,
        outcome         text CHECK (outcome IN ('promoted', 'rolled_back', 'failed')),
        reason          text,
        started_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
        finished_at     timestamptz
    );
    CREATE UNIQUE INDEX rollouts_one_active ON rollouts (customer) WHERE outcome IS NULL;
    CREATE TABLE rollout_analyses (
        id                  bigserial PRIMARY KEY,
        rollout_id          bigint NOT NULL REFERENCES rollouts (id),
        step                text NOT NULL,
        canary_requests     integer NOT NULL,
        canary_errors       integer NOT NULL,
        canary_nonfinite    integer NOT NULL,
        rows_with_actuals   integer NOT NULL,
        canary_wape         double precision,
        champion_wape       double precision,
        passed              boolean NOT NULL,
        reason              text NOT NULL,
        analysed_at         timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX rollout_analyses_rollout ON rollout_analyses (rollout_id, id);
    CREATE TABLE champion_moves (
        id              bigserial PRIMARY KEY,
        customer        text NOT NULL,
        from_version    text,
        to_version      text NOT NULL,
        decision_id     bigint NOT NULL REFERENCES deployment_decisions (id),
        rollout_id      bigint NOT NULL UNIQUE REFERENCES rollouts (id),
        moved_at        timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    ALTER TABLE gate_results ADD COLUMN gate text NOT NULL DEFAULT 'beats_champion';
    ALTER TABLE gate_results ADD COLUMN model_version text;
    """,
    # 7: the gate's reference is the champion, else the challenger, else seasonal naive: the
    # registered version it was scored against (NULL: seasonal naive).
    """
    ALTER TABLE gate_results ADD COLUMN reference_version text;
    """,
    # 8: the rollout's hand abort request, the MLflow run of each deployment decision (and
    # which analyses are mirrored into it), and the deploy-time verdicts looked up by version.
    """
    ALTER TABLE rollouts ADD COLUMN abort_reason text;
    ALTER TABLE rollouts ADD COLUMN abort_by text;
    ALTER TABLE rollouts ADD COLUMN abort_requested_at timestamptz;
    ALTER TABLE deployment_decisions ADD COLUMN mlflow_run_id text;
    ALTER TABLE rollout_analyses ADD COLUMN mlflow_logged_at timestamptz;
    CREATE INDEX rollout_analyses_unlogged ON rollout_analyses (id)
        WHERE mlflow_logged_at IS NULL;
    CREATE INDEX gate_results_version ON gate_results (customer, model_version, gate, id DESC);
    """,
    # 9: what the UI was last told per customer (the `serving_report` sensor): the champion
    # move materialized on `deployed_model` and the freshness verdict reported on its check.
    """
    CREATE TABLE serving_reports (
        customer        text PRIMARY KEY,
        move_id         bigint,
        freshness       text,
        reported_at     timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX champion_moves_customer ON champion_moves (customer, id DESC);
    CREATE INDEX gate_results_customer ON gate_results (customer, gate, id DESC);
    """,
    # 10: customers the retraining policy does not schedule because their data stopped
    # (issue 31): since when no rows of theirs arrived, until their rows arrive again.
    """
    CREATE TABLE retraining_deferrals (
        customer            text PRIMARY KEY,
        reason              text NOT NULL,
        no_data_since       date,
        published_up_to     date NOT NULL,
        first_deferred_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
        last_deferred_at    timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    """,
    # 11: a canary analysis's outcome (pass, fail or inconclusive: an inconclusive one extends
    # the step, issue 26), the rule that decided it and the evidence's numbers (rows, rows
    # needed, interval). Older rows: outcome NULL, read from `passed`.
    """
    ALTER TABLE rollout_analyses ADD COLUMN outcome text
        CHECK (outcome IN ('pass', 'fail', 'inconclusive'));
    ALTER TABLE rollout_analyses ADD COLUMN rule text;
    ALTER TABLE rollout_analyses ADD COLUMN evidence jsonb;
    """,
    # 12: each prediction's bounds at the served levels (issue 26, part 4), as its model gave
    # them: {"80": [lower, upper], "95": [...]}; NULL for a model without intervals.
    """
    ALTER TABLE prediction_log ADD COLUMN intervals jsonb;
    """,
    # 13: each canary analysis's coverage of the canary's prediction intervals on its rows
    # with actuals: {"80": 0.81, "95": 0.94, "rows": 120}; NULL when it logged no bounds.
    """
    ALTER TABLE rollout_analyses ADD COLUMN canary_coverage jsonb;
    """,
]

_LOCK_ID = 7_231_001  # pg_advisory_xact_lock key: one migrator at a time


def apply_migrations(url: str, migrations: list[str], lock_id: int) -> int:
    """Apply the pending entries of `migrations` under an advisory lock; return the version.

    Shared by every database the project owns (its own tables, the GPU service's), each with
    its own list and lock key.
    """
    with transaction(url) as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id,))
        cur.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY)")
        cur.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
        current = one_row(cur)[0]
        for version, statement in enumerate(migrations, start=1):
            if version > current:
                cur.execute(statement)
                cur.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
    return len(migrations)


def migrate(url: str) -> int:
    """Bring the project's own tables up to date; return the schema version."""
    return apply_migrations(url, MIGRATIONS, _LOCK_ID)
