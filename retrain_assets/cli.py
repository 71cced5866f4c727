"""The `retrain-assets` command line: start the platform, watch it, steer and repair it.

Each subcommand's `--help` says what it does in full; docs/cli.md is the same text as a page,
generated from these parsers by `make docs`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Callable

from retrain_assets.demo.seed import land_demo_tenants
from retrain_assets.gpu.service.__main__ import add_arguments as add_gpu_arguments
from retrain_assets.gpu.service.__main__ import run as run_gpu_service
from retrain_assets.gpu.slurm.__main__ import add_arguments as add_slurm_arguments
from retrain_assets.gpu.slurm.__main__ import run as run_slurm
from retrain_assets.policy.thresholds import DEFAULTS as POLICY_DEFAULTS
from retrain_assets.runtime.machine_catalog import MACHINES
from retrain_assets.serving.__main__ import add_arguments as add_serve_arguments
from retrain_assets.serving.__main__ import run as run_serve
from retrain_assets.settings import landing_root
from retrain_assets.settings_model import check_settings


def _simulate(args: argparse.Namespace) -> int:
    start = dt.date.fromisoformat(args.start) if args.start else None
    for spec, days in land_demo_tenants(landing_root(), args.days, start):
        span = f"{days[0]} .. {days[-1]}" if days else "nothing new (pass --days N)"
        print(f"{spec.name} ({spec.country}): {len(days)} file(s) {span}")
    return 0


def _migrate(_: argparse.Namespace) -> int:
    from retrain_assets.store.migrations import migrate
    from retrain_assets.store.server import ensure_database, start_server

    server = start_server()
    url = ensure_database(server, "app")
    version = migrate(url)
    kind = "embedded" if server.embedded else "RETRAIN_PG_URL"
    print(f"project database ready ({kind} server), schema version {version}")
    return 0


def _up(args: argparse.Namespace) -> int:
    from retrain_assets.runtime.up import run_up  # imported here: only `up` needs it

    try:
        return run_up(demo=not args.no_demo)
    except FileNotFoundError as err:  # dagster.yaml missing: nothing started
        raise ValueError(str(err)) from err


def _down(args: argparse.Namespace) -> int:
    from retrain_assets.runtime.down import run_down
    from retrain_assets.settings import retrain_home

    if args.grace < 0:
        raise ValueError(f"--grace must be 0 or more seconds, not {args.grace}")
    return run_down(retrain_home(), args.grace)


def _demo_clock(args: argparse.Namespace) -> int:
    from retrain_assets.demo.clock import run_clock
    from retrain_assets.demo.forecast_requests import ForecastClient, forecast_asker
    from retrain_assets.runtime.demo_mode import demo_day_seconds
    from retrain_assets.runtime.signals import StopRequests
    from retrain_assets.settings import serve_token, serve_url

    stop = StopRequests()
    stop.install()
    seconds = args.seconds if args.seconds is not None else demo_day_seconds()

    def say(line: str) -> None:
        print(line, flush=True)

    asker = forecast_asker(ForecastClient(serve_url(), serve_token()), say)
    say(
        f"demo clock: a day per tenant every {seconds:g} s into {landing_root()}; forecasts "
        f"asked of {serve_url()} before each day lands"
    )
    from retrain_assets.demo.pacing import pace
    from retrain_assets.store.resource import ProjectDatabase

    hold = pace(ProjectDatabase().prepare(), landing_root())
    run_clock(landing_root(), seconds, lambda: stop.requested, say_landed(say), asker, hold)
    return 0


def say_landed(say: Callable[[str], None]) -> Callable[[str], None]:
    """Return the clock's voice: landed days say "landed ...", a wait says why as it is."""
    return lambda line: say(line if line.startswith("waiting") else f"landed {line}")


def _customers_add(args: argparse.Namespace) -> int:
    from retrain_assets.runtime.customers_admin import add_customer

    new_row, new_partition = add_customer(args.name, args.country)
    state = "added" if new_row or new_partition else "already known"
    print(f"customer {args.name}: {state} (partition in Dagster, row in the project table)")
    return 0


def _webserver(args: argparse.Namespace) -> int:
    from retrain_assets.runtime.webserver import run_webserver

    run_webserver(args.host, args.port, args.workspace)


def _diagram(args: argparse.Namespace) -> int:
    from retrain_assets.machines.diagram import mermaid
    from retrain_assets.runtime.machine_catalog import machine_named

    print(mermaid(machine_named(args.machine)))
    return 0


def _status(args: argparse.Namespace) -> int:
    from retrain_assets.policy.deferrals import deferral_lines
    from retrain_assets.runtime.backend_health import backend_health_lines
    from retrain_assets.runtime.machine_report import status_lines
    from retrain_assets.runtime.serving_status import serving_lines
    from retrain_assets.store.resource import ProjectDatabase

    url = ProjectDatabase().prepare()
    lines = backend_health_lines() + serving_lines(url, args.customer)
    lines += status_lines(url, args.customer)
    print("\n".join(lines + deferral_lines(url, args.customer)))
    return 0


def _history(args: argparse.Namespace) -> int:
    from retrain_assets.customers import validate_customer_name
    from retrain_assets.runtime.machine_report import history_lines
    from retrain_assets.store.resource import ProjectDatabase

    url = ProjectDatabase().prepare()
    customer = validate_customer_name(args.customer)
    print("\n".join(history_lines(url, customer, args.machine, args.run_key)))
    return 0


def _audit(args: argparse.Namespace) -> int:
    from mlflow.exceptions import MlflowException

    from retrain_assets.registry.audit import audit_registry
    from retrain_assets.registry.mlflow_registry import MlflowRegistry
    from retrain_assets.settings import mlflow_tracking_uri

    uri = args.tracking_uri or mlflow_tracking_uri()
    # MLflow's client retries an unreachable server for minutes; a command answers promptly.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
    try:
        problems = audit_registry(MlflowRegistry(uri), args.customer)
    except MlflowException as err:
        raise ValueError(f"cannot read the MLflow registry at {uri}: {err.message}") from err
    for problem in problems:
        print(problem.message)
    scope = f"customer {args.customer}" if args.customer else "every customer"
    deployments = _audit_deployments(uri, args.customer)
    if problems:
        keys = sorted({problem.run_key for problem in problems})
        print(f"{len(keys)} run key(s) duplicated in MLflow at {uri} ({scope})", file=sys.stderr)
    if deployments:
        print(f"{deployments} deployment mismatch(es) ({scope})", file=sys.stderr)
    if problems or deployments:
        return 1
    print(f"no run key has more than one candidate run or registered version ({scope}, {uri})")
    print(f"every champion move matches one deployment decision and one promoted rollout ({scope})")
    return 0


def _audit_deployments(uri: str, customer: str | None) -> int:
    """Print the deployment audit's mismatches; return how many."""
    from retrain_assets.deployment.commands import audit_lines
    from retrain_assets.registry.mlflow_registry import MlflowRegistry
    from retrain_assets.store.resource import ProjectDatabase

    lines = audit_lines(ProjectDatabase().prepare(), MlflowRegistry(uri), customer)
    for line in lines:
        print(line)
    return len(lines)


def _decisions(args: argparse.Namespace) -> int:
    from retrain_assets.policy.commands import decision_lines
    from retrain_assets.store.resource import ProjectDatabase

    url = ProjectDatabase().prepare()
    print("\n".join(decision_lines(url, args.customer, args.limit)))
    return 0


def _deployments(args: argparse.Namespace) -> int:
    from retrain_assets.deployment.commands import auto_lines, deployment_lines, set_auto
    from retrain_assets.store.resource import ProjectDatabase

    url = ProjectDatabase().prepare()
    if args.action == "auto":
        if args.value is None:
            print("\n".join(auto_lines(url, args.customer_name)))
        else:
            print(set_auto(url, args.customer_name, args.value, _who()))
        return 0
    print("\n".join(deployment_lines(url, args.customer, args.limit)))
    return 0


def _rollback(args: argparse.Namespace) -> int:
    from retrain_assets.deployment.commands import rollback_now
    from retrain_assets.registry.mlflow_registry import MlflowRegistry
    from retrain_assets.settings import mlflow_tracking_uri
    from retrain_assets.store.resource import ProjectDatabase

    url = ProjectDatabase().prepare()
    registry = MlflowRegistry(mlflow_tracking_uri())
    print(rollback_now(url, registry, args.customer, args.reason, args.by or _who()))
    return 0


def _token(args: argparse.Namespace) -> int:
    from retrain_assets.runtime.token_files import current_token

    token, source = current_token(args.service)
    print(token)
    print(f"(from {source})", file=sys.stderr)
    return 0


def _who() -> str:
    """Return who runs a command, for the records (`$USER`, else the command)."""
    return os.environ.get("USER") or os.environ.get("USERNAME") or "retrain-assets CLI"


# What each command's --help says it does; docs/cli.md is generated from them (`make docs`).
_DESCRIPTIONS = {
    "simulate": "Land demo tenants' daily files in the landing zone: a new tenant gets 120 days "
    "from 2026-01-01 (or --start), a tenant with history the next --days days. Refuses days after "
    "yesterday, with the reason.",
    "migrate": "Start (or attach to) the embedded PostgreSQL (or RETRAIN_PG_URL) and create the "
    "project database and its tables.",
    "up": "Start the platform and keep it running until Ctrl-C or SIGTERM, which stop every "
    "process (SIGKILL after 20 s) and exit 0. In order: refuse (exit 2) a port it needs that is "
    "taken (webserver, GPU service, MLflow, prediction service; the message names the variable "
    "that moves it) or a second `up` on the same RETRAIN_HOME; start (or attach to) PostgreSQL "
    "(embedded unless RETRAIN_PG_URL) and create the databases `retrain_dagster`, `retrain_app` "
    "(migrated) and `retrain_mlflow`; copy dagster.yaml into `$RETRAIN_HOME/dagster_home`; on "
    "the local landing zone (RETRAIN_LANDING_URL unset) and without --no-demo, land the demo "
    "tenants when the zone is empty (with their demo settings: policy overrides, auto_deploy "
    "on); start the GPU service (`retrain-assets gpu-service` on 127.0.0.1:$RETRAIN_GPU_PORT, "
    "$RETRAIN_GPU_SLOTS slots; none when RETRAIN_GPU_URL is set), the MLflow tracking server "
    "(127.0.0.1:$RETRAIN_MLFLOW_PORT; none when MLFLOW_TRACKING_URI is set), the prediction "
    "service (`retrain-assets serve` on 127.0.0.1:$RETRAIN_SERVE_PORT), one Dagster code server "
    "(`dagster code-server start` on a private Unix socket), then the Dagster webserver "
    "(`retrain-assets webserver`) and dagster-daemon, both on a workspace naming that code "
    "server (`$DAGSTER_HOME/workspace.yaml`), and, for the demo, the "
    "demo clock that lands a simulated day every $RETRAIN_DEMO_DAY_SECONDS. Each process writes "
    "to `$RETRAIN_HOME/logs/<process>.log`; the UI, GraphQL, Postgres, GPU service, MLflow and "
    "prediction service URLs are printed once they answer. Every process gets RETRAIN_GPU_URL "
    "and RETRAIN_SERVE_URL and one RETRAIN_GPU_TOKEN and RETRAIN_SERVE_TOKEN (random per start "
    "when unset). The demo's short intervals (5-10 s ticks, 40 s canary steps) are defaults for "
    "the children only; a variable you set wins. A process that crashes after the start is "
    "restarted with backoff (1, 2, 4 ... up to 30 s), named with the end of its log in `up`'s "
    "output and its own log; the fifth crash of one process within 5 minutes stops the others "
    "and exits 1. Each child starts with the default action for SIGTERM, even when `up` was "
    "launched with it ignored (nohup, a job runner). `up` records its pid, its processes' pids "
    "and the endpoints it chose in `$RETRAIN_HOME/platform.json` (owner only; removed at a clean "
    "stop), where every other command finds them. If `up` itself is killed, its children get "
    "SIGTERM (a parent-death signal) and its reaper stops every process group it started and "
    "the embedded Postgres (SIGKILL after 20 s); the next `up` on the home stops what is still "
    "left, and refuses while the recorded `up` runs, naming its pid and `retrain-assets down`.",
    "down": "Stop the platform of this RETRAIN_HOME from any terminal: the processes "
    "`$RETRAIN_HOME/platform.json` records. A running `up` gets SIGTERM and stops its children "
    "itself; then (or at once, when `up` was killed) each recorded process group still running "
    "gets SIGTERM, SIGKILL after --grace seconds, and the embedded Postgres stops last. A "
    "recorded pid whose start time is not the recorded one is another program now: it is left "
    "alone, named, and the exit code is 1. Says what it stopped.",
    "demo-clock": "What `up` runs for the demo: every N seconds, ask the prediction service for "
    "each demo tenant's forecasts of its next day (customers without a champion are told so), "
    "then land that day; never a day after yesterday, and never more than 3 days ahead of the "
    "newest published feature day: on a loaded machine it waits, saying why, rather than land "
    "the demo's story faster than the platform can follow.",
    "customers": "Manage tenants.",
    "customers add": "Add a customer without a landing folder: its `customers` partition in "
    "Dagster and its row in the project table. NAME must be a safe slug (lowercase letters, "
    "digits, single inner hyphens, at most 40 characters); anything else exits 2.",
    "gpu-service": "Run the reference remote GPU training service: HTTP API (OpenAPI at "
    "/openapi.json), bearer token RETRAIN_GPU_TOKEN, jobs in the `retrain_gpu` database, "
    "LightGBM training in worker processes with checkpoints (a job resumes from its last "
    "checkpoint after a crash or restart). Before reading a body it refuses a missing or wrong "
    "token (401) and a body over 1 MiB (413); a malformed field is a 422 naming it (never "
    "echoing it); `/healthz` answers 503 while its database is unreachable. A Postgres restart "
    "requeues running jobs from their checkpoints. Exit codes: 0 on SIGINT/SIGTERM, 2 for a bad "
    "setting, 1 if another service took its database during an outage (docs/gpu-service.md).",
    "slurm": "Run a one-node Slurm cluster for the Slurm training backend under "
    "$RETRAIN_HOME/slurm: munged, slurmctld and slurmd on 127.0.0.1, slurmrestd on a unix socket "
    "(rest_auth/local). Prints the RETRAIN_SLURM_* variables that point the platform at it; "
    "stops the daemons on SIGINT/SIGTERM. Needs root and Debian's slurm-wlm, slurmrestd and "
    "munge packages; exits 2 when a daemon cannot start, with its log (docs/scaling-out.md).",
    "webserver": "What `up` runs as the Dagster UI: dagster-webserver on HOST:PORT for WORKSPACE, "
    "with each database connection it holds checked before use (a dead one is replaced), so the "
    "UI answers at once after a Postgres restart instead of failing one request per storage "
    "(upstream: dagster-io/dagster#3812).",
    "diagram": "Print a state machine (training or rollout) as a Mermaid stateDiagram-v2, "
    "rendered from the table it runs.",
    "status": "First the training backend's health (the GPU service's /healthz answered or "
    "not; for Slurm each node's state, with the reason of a drained or down one, from `sinfo`), "
    "then what serves each customer and how fresh it is, as the UI's "
    "serving_model_fresh check says (fresh, WARNING or ERROR, with what holds it back and what "
    "waits for a person and how to approve it); then each customer's state machines (training, "
    "rollout): state, run key, job, visits "
    "left in the state, when it last moved, why a finished run ended or the last error, the last "
    "step.",
    "history": "Every recorded visit of a customer's machines, oldest first: state, visit, where "
    "it went (or that it yielded), the note or error.",
    "audit": "Exit 1 and list what is wrong if a run key has more than one MLflow candidate run "
    "or registered version, or a move of alias `champion` does not match exactly one deployment "
    "decision and one promoted rollout (or a decision has two rollouts, or the aliases and "
    "serving_routes disagree); exit 0 when all is well. The checks `one_version_per_run_key` "
    "and `deployments_match_decisions` show the same rules per customer in the UI.",
    "decisions": "List retraining decisions, newest first: id, time, customer, policy, snapshot "
    'days, who decided, the Dagster run that took it up (or "not launched yet"), and the '
    "reason.",
    "deployments": "List deployment decisions, newest first, with their rollouts (state, outcome, "
    "reason); `deployments auto` shows or sets whether a passing registration deploys by itself "
    "(docs/deployment.md).",
    "deployments auto": "Show every customer's auto_deploy setting, or set one customer's: with "
    "it on, a candidate that passes its gate and the deploy-time check is deployed by the run "
    "that registered it.",
    "rollback": "Abort the customer's rollout in progress: ROLLBACK at once, canary traffic to "
    "0 %, recorded with who and why.",
    "policy": "The retraining policy's per-customer settings, and why it decides or waits.",
    "policy show": "Show the retraining policy's effective settings, of every customer or one; "
    "`*` marks a customer's override.",
    "policy set": "Override some of one customer's retraining settings; an unknown customer or a "
    "value out of range is refused with the setting and its range (exit 2).",
    "policy why": "One customer's verdict from the retraining policy's own evaluation, read now: "
    "it would decide (which policy), or why not: no decision for anyone while feature days are "
    "being published (settled data), busy (and with what), not enough history (days published "
    "of days needed), nothing due (when the schedule is due, new rows of the threshold, drift), "
    "or a drift alert waiting for approval (its id, and the approve_drift_retraining launchpad "
    "to approve it). The second line is the reason the sensor's tick gives. It records no "
    "decision, alert or drift baseline and requests no run. Exit 0; an unknown customer (no "
    "`customers` partition) exits 2, one the policy could not evaluate exits 1.",
    "serve": "Run the prediction service: each customer's champion and canary as serving_routes "
    "says, on the Open Inference Protocol (v2) paths and a JSON route, every prediction logged; "
    "SIGTERM drains its log and exits 0 (docs/serving.md).",
    "token": "Print the bearer token of the prediction service (`serve`) or the GPU service "
    "(`gpu`): $RETRAIN_SERVE_TOKEN / $RETRAIN_GPU_TOKEN when set, else the file `up` wrote under "
    "$RETRAIN_HOME/tokens (owner only; random per start), else the development default. The "
    "token alone goes to stdout, where it came from to stderr, so "
    '`curl -H "Authorization: Bearer $(retrain-assets token serve)" ...` works from a second '
    "terminal.",
    "reset": "Move a customer's training machine to a state of its table (run key and job kept, "
    "budgets afresh); refuses an unknown state, a customer without a training run or with a "
    "Dagster run queued or in progress (exit 2). Recorded in machine_history with who (--by, "
    "else the operating-system user) and why; the next gpu_job_poller tick advances it "
    "(docs/handoff.md).",
    "retry": "Re-enter a customer's FAILED training run where it can: a saved candidate goes to "
    "its gate, a succeeded GPU job is downloaded (not retrained), a running one polled, a failed "
    "one resubmitted. A run refused before any GPU job because its window cannot be judged is "
    "not retried (exit 2): launch training_job for a window that can be judged.",
}


_POLICY_OPTIONS = {  # CLI flag -> (setting, type, what it means)
    "--schedule-days": (
        "schedule_days",
        int,
        "retrain when the last decision is at least N days old",
    ),
    "--min-new-rows": (
        "min_new_rows",
        int,
        "retrain when N new store_day_features rows were published after the last decision's "
        "window",
    ),
    "--drift-threshold": (
        "drift_threshold",
        float,
        "ask a person to approve retraining when a drift feature's mean shifts by X standard "
        "deviations",
    ),
    "--min-history-days": (
        "min_history_days",
        int,
        "published days with rows a customer needs before its first training",
    ),
    "--drift-recent-days": (
        "drift_recent_days",
        int,
        "new days (after the training window) that drift compares",
    ),
    "--window-days": ("window_days", int, "published days a decision trains on, at most"),
}


def _policy(args: argparse.Namespace) -> int:
    from retrain_assets.policy.commands import apply_settings, settings_lines
    from retrain_assets.store.resource import ProjectDatabase

    url = ProjectDatabase().prepare()
    if args.action == "show":
        print("\n".join(settings_lines(url, args.customer)))
        return 0
    changes = {
        name: getattr(args, name)
        for name, _, _ in _POLICY_OPTIONS.values()
        if getattr(args, name) is not None
    }
    print(apply_settings(url, args.customer, changes, "retrain-assets policy set"))
    return 0


def _policy_why(args: argparse.Namespace) -> int:
    from retrain_assets.features.parquet_store import PartitionStorage
    from retrain_assets.policy.why import explain
    from retrain_assets.runtime.training_admin import attach_platform

    url, instance = attach_platform()
    with instance:
        answer = explain(url, instance, PartitionStorage().store(), args.customer)
    print("\n".join(answer.lines))
    return 0 if answer.evaluated else 1


def _repair(args: argparse.Namespace) -> int:
    from retrain_assets.machines.repoint import check_state
    from retrain_assets.machines.training import training_machine
    from retrain_assets.runtime.training_admin import (
        attach_platform,
        operator_name,
        reset_training,
        retry_training,
    )

    if args.command == "reset":  # refused before any server or instance is touched
        check_state(training_machine(), args.to)
    who = operator_name(args.by)
    url, instance = attach_platform()
    with instance:
        if args.command == "reset":
            done = reset_training(url, instance, args.customer, args.to, args.reason, who)
        else:
            done = retry_training(url, instance, args.customer, who, args.reason)
    print(
        f"{args.customer}: training run {done.after.run_key} moved from {done.before.state} "
        f"to {done.after.state} by {who}; {done.next_step}"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser for every subcommand."""
    parser = argparse.ArgumentParser(prog="retrain-assets", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser(
        "simulate",
        description=_DESCRIPTIONS["simulate"],
        help="land demo tenants' daily files in the landing zone",
    )
    sim.add_argument("--days", type=int, default=None, help="days to land (new tenants: 120)")
    sim.add_argument("--start", default=None, help="first day for a tenant with no history")
    sim.set_defaults(handler=_simulate)
    mig = sub.add_parser(
        "migrate",
        description=_DESCRIPTIONS["migrate"],
        help="start Postgres if needed and create the project tables",
    )
    mig.set_defaults(handler=_migrate)
    up = sub.add_parser(
        "up",
        description=_DESCRIPTIONS["up"],
        help="start the platform (and the live demo); Ctrl-C stops all",
    )
    up.add_argument(
        "--no-demo",
        action="store_true",
        help="start the platform alone: no demo tenants landed, no demo clock",
    )
    up.set_defaults(handler=_up)
    down = sub.add_parser(
        "down",
        description=_DESCRIPTIONS["down"],
        help="stop this home's platform (the processes `up` recorded), from any terminal",
    )
    down.add_argument(
        "--grace",
        type=float,
        default=20.0,
        help="seconds between SIGTERM and SIGKILL (default 20)",
    )
    down.set_defaults(handler=_down)
    clock = sub.add_parser(
        "demo-clock",
        description=_DESCRIPTIONS["demo-clock"],
        help="land the next simulated day of each demo tenant every few seconds",
    )
    clock.add_argument(
        "--seconds", type=float, default=None, help="default: $RETRAIN_DEMO_DAY_SECONDS, else 20"
    )
    clock.set_defaults(handler=_demo_clock)
    customers = sub.add_parser(
        "customers", description=_DESCRIPTIONS["customers"], help="manage tenants"
    ).add_subparsers(dest="action", required=True)
    add = customers.add_parser(
        "add",
        description=_DESCRIPTIONS["customers add"],
        help="add a customer (a safe slug) without a landing folder",
    )
    add.add_argument("name", metavar="NAME", help="the customer's name, a safe slug")
    add.add_argument(
        "--country", metavar="CC", default=None, help="two-letter code for holiday features"
    )
    add.set_defaults(handler=_customers_add)
    gpu = sub.add_parser(
        "gpu-service",
        description=_DESCRIPTIONS["gpu-service"],
        help="run the reference GPU training service",
    )
    add_gpu_arguments(gpu)
    gpu.set_defaults(handler=run_gpu_service)
    slurm = sub.add_parser(
        "slurm",
        description=_DESCRIPTIONS["slurm"],
        help="run a one-node Slurm cluster for the Slurm training backend",
    )
    add_slurm_arguments(slurm)
    slurm.set_defaults(handler=run_slurm)
    web = sub.add_parser(
        "webserver",
        description=_DESCRIPTIONS["webserver"],
        help="run the Dagster UI as `up` does (reconnects after a Postgres restart)",
    )
    web.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    web.add_argument("--port", type=int, default=3000, help="default 3000")
    web.add_argument("--workspace", required=True, help="the workspace.yaml to load")
    web.set_defaults(handler=_webserver)
    diagram = sub.add_parser(
        "diagram",
        description=_DESCRIPTIONS["diagram"],
        help="print a state machine as Mermaid, from its table",
    )
    diagram.add_argument("machine", choices=sorted(MACHINES), help="which state machine")
    diagram.set_defaults(handler=_diagram)
    status = sub.add_parser(
        "status",
        description=_DESCRIPTIONS["status"],
        help="each customer's state machines: state, why, visits left, last step",
    )
    status.add_argument("--customer", default=None, help="one customer only")
    status.set_defaults(handler=_status)
    hist = sub.add_parser(
        "history",
        description=_DESCRIPTIONS["history"],
        help="every recorded visit of a customer's state machines",
    )
    hist.add_argument("customer", help="the customer whose visits to list")
    hist.add_argument("--machine", choices=sorted(MACHINES), default=None, help="one machine")
    hist.add_argument("--run-key", default=None, help="one run only")
    hist.set_defaults(handler=_history)
    audit = sub.add_parser(
        "audit",
        description=_DESCRIPTIONS["audit"],
        help="check the registry and champion moves against the records; exit 1 if anything is off",
    )
    audit.add_argument("--customer", default=None, help="audit one customer only")
    audit.add_argument(
        "--tracking-uri",
        default=None,
        help="default: $MLFLOW_TRACKING_URI, else the running platform's, else the local server",
    )
    audit.set_defaults(handler=_audit)
    decisions = sub.add_parser(
        "decisions",
        description=_DESCRIPTIONS["decisions"],
        help="list retraining decisions, newest first",
    )
    decisions.add_argument("--customer", default=None, help="one customer's decisions only")
    decisions.add_argument("--limit", type=int, default=50, help="at most this many (50)")
    decisions.set_defaults(handler=_decisions)
    deployments = sub.add_parser(
        "deployments",
        description=_DESCRIPTIONS["deployments"],
        help="list deployment decisions and their rollouts; `auto` settings",
    )
    deployments.add_argument("--customer", default=None, help="one customer's decisions only")
    deployments.add_argument("--limit", type=int, default=50, help="at most this many (50)")
    deployments.set_defaults(handler=_deployments, action="list")
    deployments_sub = deployments.add_subparsers(dest="action")
    auto = deployments_sub.add_parser(
        "auto",
        description=_DESCRIPTIONS["deployments auto"],
        help="show or set whether a passing registration deploys by itself",
    )
    auto.add_argument(
        "customer_name",
        metavar="CUSTOMER",
        nargs="?",
        default=None,
        help="one customer (default: list every customer's setting)",
    )
    auto.add_argument(
        "value", nargs="?", choices=["on", "off"], default=None, help="set it (default: show it)"
    )
    auto.set_defaults(handler=_deployments)
    rollback = sub.add_parser(
        "rollback",
        description=_DESCRIPTIONS["rollback"],
        help="abort a customer's rollout by hand: the canary gets no traffic",
    )
    rollback.add_argument("customer", help="the customer whose rollout to abort")
    rollback.add_argument("--reason", required=True, help="why (recorded with the rollback)")
    rollback.add_argument("--by", default=None, help="who (default: $USER)")
    rollback.set_defaults(handler=_rollback)
    policy = sub.add_parser(
        "policy",
        description=_DESCRIPTIONS["policy"],
        help="the retraining policy's per-customer settings; why it decides or waits",
    )
    policy_sub = policy.add_subparsers(dest="action", required=True)
    show = policy_sub.add_parser(
        "show",
        description=_DESCRIPTIONS["policy show"],
        help="effective settings; * marks an override",
    )
    show.add_argument("customer", nargs="?", default=None, help="one customer (default: all)")
    show.set_defaults(handler=_policy)
    set_ = policy_sub.add_parser(
        "set",
        description=_DESCRIPTIONS["policy set"],
        help="override some of a customer's settings",
    )
    set_.add_argument("customer", help="the customer whose settings to override")
    for flag, (name, kind, meaning) in _POLICY_OPTIONS.items():
        default = getattr(POLICY_DEFAULTS, name)
        metavar = "N" if kind is int else "X"
        set_.add_argument(
            flag,
            dest=name,
            type=kind,
            default=None,
            metavar=metavar,
            help=f"{meaning} (default {default})",
        )
    set_.set_defaults(handler=_policy)
    why = policy_sub.add_parser(
        "why",
        description=_DESCRIPTIONS["policy why"],
        help="one customer's verdict and reason, from the policy's own evaluation",
    )
    why.add_argument("customer", help="the customer to explain")
    why.set_defaults(handler=_policy_why)
    serve = sub.add_parser(
        "serve",
        description=_DESCRIPTIONS["serve"],
        help="run the prediction service (v2 inference protocol and a JSON route)",
    )
    add_serve_arguments(serve)
    serve.set_defaults(handler=run_serve)
    token = sub.add_parser(
        "token",
        description=_DESCRIPTIONS["token"],
        help="print the prediction (serve) or GPU (gpu) service's bearer token",
    )
    token.add_argument("service", choices=["serve", "gpu"], help="whose token")
    token.set_defaults(handler=_token)
    reset = sub.add_parser(
        "reset",
        description=_DESCRIPTIONS["reset"],
        help="move a customer's training machine to a named state (recorded: who, why)",
    )
    reset.add_argument("customer", help="the customer whose training machine to move")
    reset.add_argument("--to", required=True, help="a state of the training machine's table")
    reset.add_argument("--reason", required=True, help="why: kept in the machine's history")
    reset.add_argument("--by", default=None, help="who (default: the operating-system user)")
    reset.set_defaults(handler=_repair)
    retry = sub.add_parser(
        "retry",
        description=_DESCRIPTIONS["retry"],
        help="re-enter a customer's FAILED training run where it can (no retrain)",
    )
    retry.add_argument("customer", help="the customer whose FAILED training run to re-enter")
    retry.add_argument("--reason", default=None, help="why: kept in the machine's history")
    retry.add_argument("--by", default=None, help="who (default: the operating-system user)")
    retry.set_defaults(handler=_repair)
    return parser


# Commands that read platform.json themselves: `up` refuses or clears it, `down` stops it.
_OWN_PLATFORM_FILE = {"up", "down"}


def _find_running_platform() -> None:
    """Point this command at the running platform's endpoints (runtime/platform_env.py)."""
    from retrain_assets.runtime.platform_env import apply_running_platform
    from retrain_assets.settings import retrain_home

    def note(line: str) -> None:
        print(f"retrain-assets: {line}", file=sys.stderr, flush=True)

    apply_running_platform(retrain_home(), note)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; a bad input or setting exits 2 with the reason, before it starts.

    Every command but `up` and `down` first takes the endpoints of the platform running for
    RETRAIN_HOME that the environment does not set.
    """
    args = build_parser().parse_args(argv)
    try:
        check_settings()
        if args.command not in _OWN_PLATFORM_FILE:
            _find_running_platform()
        return args.handler(args)
    except ValueError as err:
        print(f"retrain-assets {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
