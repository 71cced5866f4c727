"""Every environment variable the package reads, with its meaning and default: one catalogue.

The variables are read where they are used (settings.py, the sensors' intervals, the rollout's
and the landing automation's settings, `up`), each with its own parsing and range. This
catalogue is what docs/configuration.md is generated from (`make docs`), and a test fails when
a `RETRAIN_*` name in the package's source is missing here, so a new setting cannot go
undocumented. The defaults are written as a reader needs them, not parsed by the code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, what it changes, its default (markdown text)."""

    name: str
    meaning: str
    default: str


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "RETRAIN_HOME",
        "everything a local run writes; deleting it is a full reset",
        "`./.retrain`",
    ),
    Setting(
        "RETRAIN_PG_URL",
        "an existing PostgreSQL server to use instead of the embedded one",
        "unset",
    ),
    Setting("RETRAIN_DB_PREFIX", "prefix of the databases created on that server", "`retrain_`"),
    Setting(
        "RETRAIN_LANDING_URL",
        "landing zone (folder or object-storage URL); set, `up` lands no demo tenants",
        "`$RETRAIN_HOME/landing`",
    ),
    Setting(
        "RETRAIN_STORAGE_URL",
        "where asset partitions are stored as Parquet (folder or object-storage URL)",
        "`$RETRAIN_HOME/storage`",
    ),
    Setting(
        "RETRAIN_READY_TIMEOUT_SECONDS",
        "how long `up` waits for each process it starts to answer (a loaded host may need more)",
        "`120`",
    ),
    Setting(
        "RETRAIN_WEBSERVER_PORT",
        "port of the Dagster UI and GraphQL API that `up` starts (on 127.0.0.1)",
        "`3000`",
    ),
    Setting(
        "RETRAIN_DAGSTER_PG_URL",
        "Dagster instance storage (dagster.yaml reads it); `up` sets it for its processes",
        "`<prefix>dagster` on the server",
    ),
    Setting(
        "RETRAIN_DAGSTER_ARTIFACTS_DIR",
        "Dagster's local artifact storage (dagster.yaml reads it); `up` sets it for its processes",
        "`$RETRAIN_HOME/dagster_artifacts`",
    ),
    Setting(
        "RETRAIN_DAGSTER_COMPUTE_LOGS_DIR",
        "Dagster's compute logs (dagster.yaml reads it); `up` sets it for its processes",
        "`$RETRAIN_HOME/logs/compute`",
    ),
    Setting(
        "RETRAIN_RUN_WORKERS",
        "how the code server starts each Dagster run: `spawn` (Dagster's own: a fresh "
        "interpreter per run) or `forkserver` (a fork of a process with the code location "
        "loaded: less CPU per run, but the first run waits for that load; run_workers.py)",
        "`spawn`",
    ),
    Setting(
        "RETRAIN_APP_PG_URL",
        "the project's own tables; `up` sets it for its processes",
        "`<prefix>app` on the server",
    ),
    Setting(
        "RETRAIN_GPU_URL",
        "a remote GPU service for the platform to use; set, `up` starts no local one",
        "the service `up` starts, `http://127.0.0.1:$RETRAIN_GPU_PORT`",
    ),
    Setting(
        "RETRAIN_GPU_PORT",
        "port of the GPU service that `up` starts (on 127.0.0.1)",
        "`8765`",
    ),
    Setting(
        "RETRAIN_GPU_SLOTS",
        "jobs the GPU service that `up` starts trains at once (worker processes)",
        "`2`",
    ),
    Setting(
        "RETRAIN_GPU_ALLOW_FAULTS",
        "`1` or `true`: the GPU service that `up` starts accepts fault injection (tests only)",
        "unset (refused)",
    ),
    Setting(
        "RETRAIN_GPU_TOKEN",
        "bearer token of the GPU service (server and client)",
        "under `up` with its local service: a random token shared by its processes; "
        "otherwise `dev-token`, with a warning",
    ),
    Setting(
        "RETRAIN_GPU_DB_URL",
        "the GPU service's database, set by the service for the worker processes it starts "
        "(not a setting of yours)",
        "the service's own database",
    ),
    Setting(
        "RETRAIN_POLL_INTERVAL_SECONDS",
        "`gpu_job_poller` tick interval; one POLL_JOB visit per tick (budget 100)",
        "`180`",
    ),
    Setting(
        "RETRAIN_POLICY_INTERVAL_SECONDS",
        "`retraining_policy` tick interval (a positive whole number)",
        "`300`",
    ),
    Setting(
        "RETRAIN_SERVING_REPORT_INTERVAL_SECONDS",
        "`serving_report` tick interval: materializes `deployed_model` when a champion moves "
        "and requests `serving_freshness_job` when a `serving_model_fresh` verdict changed",
        "`60`",
    ),
    Setting(
        "RETRAIN_CODE_COMMIT",
        "the code commit in the run key",
        "`git rev-parse HEAD` of the checkout",
    ),
    Setting(
        "RETRAIN_MLFLOW_PORT",
        "port of the MLflow tracking server that `up` starts",
        "`5000`",
    ),
    Setting(
        "MLFLOW_TRACKING_URI",
        "an MLflow server to use instead; `up` then starts none",
        "`http://127.0.0.1:$RETRAIN_MLFLOW_PORT`",
    ),
    Setting(
        "RETRAIN_MLFLOW_ARTIFACTS_URL",
        "where the MLflow server `up` starts keeps models and plots (a folder or object storage "
        "such as `s3://bucket/mlflow`; the server needs its credentials)",
        "`$RETRAIN_HOME/mlflow-artifacts`",
    ),
    Setting(
        "RETRAIN_RETRY_FIRST_SECONDS",
        "wait before a training run's first retry (a download, a resubmission, a candidate run "
        "requested again); each later retry waits twice as long, up to the maximum",
        "`30`",
    ),
    Setting(
        "RETRAIN_RETRY_MAX_SECONDS",
        "the longest wait between two retries of a training run's state",
        "`600`",
    ),
    Setting(
        "RETRAIN_RETRY_JITTER",
        "each retry's wait is drawn within +/- this fraction of it, so runs that failed "
        "together do not retry together",
        "`0.25`",
    ),
    Setting(
        "RETRAIN_TRAINING_BACKEND",
        "where training jobs go: `reference` (the GPU service above) or `slurm` (a Slurm "
        "cluster through slurmrestd; docs/scaling-out.md)",
        "`reference`",
    ),
    Setting(
        "RETRAIN_SLURM_URL",
        "slurmrestd of the Slurm backend: `unix:///path/to/socket` or `http(s)://host:port`",
        "`unix://$RETRAIN_HOME/slurm/slurmrestd.socket` (the cluster `retrain-assets slurm` "
        "starts)",
    ),
    Setting(
        "RETRAIN_SLURM_TOKEN",
        "an `auth/jwt` token for slurmrestd (`scontrol token`); unset: `rest_auth/local`",
        "unset",
    ),
    Setting(
        "RETRAIN_SLURM_USER",
        "the Slurm user name sent with that token; the poll counts only this user's jobs",
        "unset",
    ),
    Setting(
        "RETRAIN_SLURM_PARTITION",
        "the partition training jobs queue in",
        "the cluster's default partition",
    ),
    Setting("RETRAIN_SLURM_TIME_LIMIT_MINUTES", "each training job's Slurm time limit", "`360`"),
    Setting(
        "RETRAIN_SLURM_GRES",
        "generic resources each training job asks for, e.g. `gpu:1`",
        "unset (no GPU asked)",
    ),
    Setting(
        "RETRAIN_SLURM_STORAGE",
        "a folder every Slurm node shares with the platform: specs, checkpoints, models",
        "`$RETRAIN_HOME/slurm/jobs`",
    ),
    Setting(
        "RETRAIN_SLURM_PYTHON",
        "the Python (with retrain_assets installed) the batch jobs run on the nodes",
        "the platform's own interpreter",
    ),
    Setting(
        "RETRAIN_SLURM_ATTEMPT",
        "the attempt number the Slurm backend gives each batch job it submits (not a setting "
        "of yours)",
        "set by the backend",
    ),
    Setting(
        "RETRAIN_GPU_OUTAGE_LIMIT_SECONDS",
        "how long a training run waits on an unreachable training service before it ends FAILED "
        "(an outage is recorded once, its ticks do not spend POLL_JOB's visits)",
        "`86400`",
    ),
    Setting(
        "RETRAIN_EVIDENCE_MIN_TRAIN_ROWS",
        "rows of the customer a window's training part needs, or `training_job` refuses it "
        "before any GPU job",
        "`28`",
    ),
    Setting(
        "RETRAIN_EVIDENCE_MIN_HOLDOUT_ROWS",
        "rows of the customer the holdout needs (for the refusal and the gate's \"not enough "
        'evidence")',
        "`7`",
    ),
    Setting(
        "RETRAIN_EVIDENCE_MIN_HOLDOUT_ROWS_PER_STORE",
        "holdout rows each store with training rows needs",
        "`1`",
    ),
    Setting(
        "RETRAIN_GATE_MARGIN",
        "how much lower (relative) a candidate's WAPE must be than the champion's (or seasonal "
        "naive's) to pass `beats_champion`; also the `gate_settings` resource's `margin`",
        "`0.02`",
    ),
    Setting(
        "RETRAIN_GATE_RULE",
        "which rule decides `beats_champion`: `margin` (RETRAIN_GATE_MARGIN on the holdout's "
        "WAPE) or `evidence` (windows, paired bootstrap interval, store guard; "
        "models/gate_evidence.py); the check's metadata shows both",
        "`margin`",
    ),
    Setting(
        "RETRAIN_GATE_WINDOWS",
        "rolling-origin windows of the holdout the evidence gate judges (the export's holdout "
        'must cover them all, else "not enough evidence")',
        "`1`",
    ),
    Setting("RETRAIN_GATE_WINDOW_DAYS", "days in each of the evidence gate's windows", "`7`"),
    Setting(
        "RETRAIN_GATE_CONFIDENCE",
        "confidence of the evidence gate's paired bootstrap interval of the WAPE change",
        "`0.90`",
    ),
    Setting(
        "RETRAIN_GATE_TOLERANCE",
        "the evidence gate passes a better candidate whose interval's upper bound of the "
        "relative WAPE change is at most this",
        "`0.02`",
    ),
    Setting(
        "RETRAIN_GATE_STORE_TOLERANCE",
        "a store whose WAPE the candidate raises by more than this (relative) counts as worse",
        "`0.10`",
    ),
    Setting(
        "RETRAIN_GATE_MAX_WORSE_STORES",
        "the share of stores that may be worse before the evidence gate's store guard fails",
        "`0.5`",
    ),
    Setting("RETRAIN_GATE_RESAMPLES", "bootstrap resamples of the evidence gate", "`2000`"),
    Setting(
        "RETRAIN_GATE_HALF_LIFE",
        "the evidence gate weighs its windows by recency: a window's weight halves every this "
        "many windows back from the newest (`0`: every window weighs the same)",
        "`1`",
    ),
    Setting(
        "RETRAIN_INTERVAL_LEVELS",
        "prediction-interval levels (percentages in (0, 100), comma-separated) the trainer "
        "computes and the prediction service answers (`lower_80`, `upper_80`, ...); `none`: "
        "no intervals (prediction_intervals.py)",
        "`80,95`",
    ),
    Setting(
        "RETRAIN_INTERVAL_WINDOWS",
        "rolling-origin refits whose errors give the intervals' widths (2 to 12)",
        "`2`",
    ),
    Setting(
        "RETRAIN_INTERVAL_WINDOW_DAYS", "days each rolling-origin refit forecasts (1 to 28)", "`7`"
    ),
    Setting(
        "RETRAIN_INTERVAL_COVERAGE_TOLERANCE",
        "how far below its level a candidate's interval may cover the holdout's actuals before "
        "`beats_champion` fails it (0.15: an 80 % interval must cover at least 65 %)",
        "`0.15`",
    ),
    Setting(
        "RETRAIN_LANDING_INTERVAL_SECONDS",
        "how often `landing_arrivals` looks at the landing zone",
        "`60`",
    ),
    Setting(
        "RETRAIN_LANDING_SETTLE_SECONDS",
        "how long a day's newest file must be unchanged before the day is read",
        "`30`",
    ),
    Setting(
        "RETRAIN_DAY_CUTOFF_HOURS",
        "how long after a day ends (UTC) it waits for active customers that have not delivered",
        "`12`",
    ),
    Setting(
        "RETRAIN_LANDING_AUTOMATION",
        "`off`: `landing_arrivals` requests nothing and says so (days are published by hand)",
        "`on`",
    ),
    Setting(
        "RETRAIN_SERVE_PORT",
        "port of the prediction service that `up` starts (on 127.0.0.1); `serve --port` "
        "overrides it",
        "`8080`",
    ),
    Setting(
        "RETRAIN_SERVE_URL",
        "where clients reach the prediction service; `up` sets it for its processes",
        "`http://127.0.0.1:$RETRAIN_SERVE_PORT`",
    ),
    Setting(
        "RETRAIN_SERVE_TOKEN",
        "bearer token of the prediction service (server and clients)",
        "under `up`: a random token per start, shared by its processes; otherwise `dev-token`, "
        "with a warning",
    ),
    Setting(
        "RETRAIN_SERVE_MAX_MODELS",
        "models the prediction service keeps in memory, one per (customer, version); the least "
        "recently used goes",
        "`32`",
    ),
    Setting("RETRAIN_SERVE_MAX_ROWS", "rows one request may carry (more: 413)", "`10000`"),
    Setting(
        "RETRAIN_SERVE_MAX_HISTORY_MB",
        "memory for the customers' feature tables the prediction service computes requests by "
        "key from; past it the least recently asked customer's is dropped and rebuilt",
        "`512`",
    ),
    Setting(
        "RETRAIN_SERVE_REFRESH_SECONDS",
        "how often the prediction service reads `serving_routes` (route moves) and "
        "`feature_snapshots` (a newly published day, for requests by key)",
        "`2`",
    ),
    Setting(
        "RETRAIN_ROLLOUT_INTERVAL_SECONDS",
        '`rollout_controller` tick interval (one "interval")',
        "`60`",
    ),
    Setting(
        "RETRAIN_ROLLOUT_STEPS",
        "canary weights, increasing, each in [0.01, 0.99]; the states are named "
        "`CANARY_<percent>` (change only with no rollout in progress)",
        "`0.10,0.50`",
    ),
    Setting(
        "RETRAIN_ROLLOUT_STEP_SECONDS",
        "minimum time of a canary step before it is analysed",
        "`1800`",
    ),
    Setting(
        "RETRAIN_ROLLOUT_MIN_PREDICTIONS",
        "canary predictions a step needs",
        "`100`",
    ),
    Setting(
        "RETRAIN_ROLLOUT_MIN_ACTUALS",
        "canary-routed rows with materialized actual sales a step needs",
        "`50`",
    ),
    Setting(
        "RETRAIN_ROLLOUT_MAX_ERROR_RATE",
        "largest share of failed canary predictions in a step",
        "`0.01`",
    ),
    Setting(
        "RETRAIN_ROLLOUT_MAX_NONFINITE",
        "most NaN/inf canary predictions in a step",
        "`0`",
    ),
    Setting(
        "RETRAIN_ROLLOUT_WAPE_TOLERANCE",
        "how much worse (relative) the canary's WAPE may be than the champion's on the same rows",
        "`0.05`",
    ),
    Setting(
        "RETRAIN_ROLLOUT_MAX_NO_DATA_INTERVALS",
        "analyses without enough data before a step fails (2880 x 60 s = 48 h: next-day "
        "forecasts' sales land a day later)",
        "`2880`",
    ),
    Setting(
        "RETRAIN_CANARY_RULE",
        "which rule judges a canary step's forecast quality: `wape` (the canary's WAPE within "
        "RETRAIN_ROLLOUT_WAPE_TOLERANCE of the champion's on RETRAIN_ROLLOUT_MIN_ACTUALS rows) or "
        "`evidence` (a paired bootstrap interval of the WAPE change on the rows the customer's "
        "volume says a step needs; inconclusive extends the step; deployment/canary_evidence.py)",
        "`wape`",
    ),
    Setting(
        "RETRAIN_CANARY_CONFIDENCE",
        "confidence of the canary evidence rule's paired bootstrap interval",
        "`0.90`",
    ),
    Setting(
        "RETRAIN_CANARY_MIN_ROWS",
        "rows with actuals a canary step needs at least under the evidence rule",
        "`50`",
    ),
    Setting(
        "RETRAIN_CANARY_MIN_DAYS",
        "days of the customer's canary traffic (rows with actuals a day x the step's share) a "
        "step's rows must cover under the evidence rule, beside RETRAIN_CANARY_MIN_ROWS",
        "`1`",
    ),
    Setting(
        "RETRAIN_CANARY_INCONCLUSIVE_LIMIT",
        "inconclusive analyses of a step, each extending it by RETRAIN_ROLLOUT_STEP_SECONDS, "
        "before RETRAIN_CANARY_FINAL_RULE decides",
        "`3`",
    ),
    Setting(
        "RETRAIN_CANARY_FINAL_RULE",
        "what decides a step still inconclusive after the limit: `point` (the WAPE change's "
        "point estimate within RETRAIN_ROLLOUT_WAPE_TOLERANCE passes, else it fails) or "
        "`rollback`",
        "`point`",
    ),
    Setting(
        "RETRAIN_DEPLOY_CHECK_DAYS",
        "newest days with actual sales the deploy-time check scores on",
        "`7`",
    ),
    Setting(
        "RETRAIN_DEPLOY_GATE_MARGIN",
        "how much lower (relative) the challenger's WAPE must be at the deploy-time check",
        "`0`",
    ),
    Setting(
        "RETRAIN_DEPLOY_PASS_MAX_AGE_HOURS",
        "how old a deploy-time pass may be for `deployment_decision` run alone",
        "`24`",
    ),
    Setting(
        "RETRAIN_DEMO_DAY_SECONDS",
        "seconds between the demo clock's days; `0`: no clock",
        "`20`",
    ),
)
