"""`rollout_controller`: advance every customer in a rollout, all in one tick.

Like the poller, a batched tick: one query for the rollouts in progress, one observation of
all canary steps due for analysis (two grouped queries and each needed feature day read once),
then `advance_many` in chunks whose routes and analyses commit with the pointers. A step still
inside its minimum time is not touched. The sensor launches no run; between ticks a rollout is
rows in Postgres. After advancing, new analyses are mirrored into their MLflow runs with what
is left of the tick's budget.
"""

import time

import dagster as dg

from retrain_assets.asset_keys import DEPLOYMENT_DECISION
from retrain_assets.automation.intervals import ROLLOUT, interval_seconds
from retrain_assets.deployment.advancing import TickReport, advance_rollouts
from retrain_assets.deployment.mirror import MirrorReport, mirror_analyses
from retrain_assets.deployment.rollout_machine import rollout_machine
from retrain_assets.deployment.rollout_settings import rollout_settings
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.machines.observations import transition_observations
from retrain_assets.registry.resource import MlflowRegistryResource
from retrain_assets.store.resource import ProjectDatabase

TICK_BUDGET_SECONDS = 40.0  # Dagster cancels a sensor evaluation after 60 s
ADVANCE_SHARE = 0.75  # of the budget for advancing; the rest for mirroring analyses
SHOWN = 20  # customers named in the skip reason; the tick log has them all


def rollout_interval_seconds() -> int:
    """Return the tick interval from ${var} (default 60).

    Raises:
        SettingsError: the variable (or another setting) is malformed or out of range.
    """
    return interval_seconds(ROLLOUT)


def _tick(
    context: dg.SensorEvaluationContext,
    project_db: ProjectDatabase,
    mlflow_registry: MlflowRegistryResource,
    partition_storage: PartitionStorage,
) -> dg.SensorResult:
    """Advance the rollouts in progress; say what happened to each customer."""
    started = time.monotonic()
    url, registry = project_db.connection_url(), mlflow_registry.registry()
    settings = rollout_settings()
    report = advance_rollouts(
        url,
        registry,
        partition_storage.store(),
        settings=settings,
        deadline=started + TICK_BUDGET_SECONDS * ADVANCE_SHARE,
    )
    mirrored = mirror_analyses(url, registry, started + TICK_BUDGET_SECONDS)
    lines = tick_lines(report, mirrored)
    for line in lines:
        context.log.info(line)
    for customer, problem in sorted(report.problems.items()):
        context.log.error(f"{customer}: {problem}")
    moves = transition_observations(
        DEPLOYMENT_DECISION, rollout_machine(settings), report.before, report.results
    )
    if not report.active:
        return dg.SensorResult(skip_reason="no rollout in progress", asset_events=moves)
    return dg.SensorResult(
        skip_reason="; ".join(lines[:1] + lines[1 : SHOWN + 1]), asset_events=moves
    )


def tick_lines(report: TickReport, mirrored: MirrorReport) -> list[str]:
    """Return a summary line, then one line per customer that moved, ended or had a problem."""
    moved = {
        customer: result.pointer.state
        for customer, result in report.results.items()
        if result.pointer is not None and result.error is None
    }
    summary = (
        f"{report.active} rollout(s) in progress: {report.waiting} inside their step's minimum "
        f"time, {len(report.results)} advanced ({report.observed} observed), "
        f"{len(report.deferred)} deferred to the next tick, {len(report.closed)} closed; "
        f"{mirrored.mirrored} analyses mirrored to MLflow"
        + (" (more next tick)" if mirrored.left else "")
        + (f", mirroring stopped: {mirrored.error}" if mirrored.error else "")
    )
    lines = [summary]
    lines += [f"{c}: {state}" for c, state in sorted(moved.items())]
    lines += [f"{c}: closed {why}" for c, why in sorted(report.closed.items())]
    lines += [f"{c}: deferred (tick budget used)" for c in report.deferred]
    return lines


def build_rollout_controller(interval_seconds: int = ROLLOUT.default) -> dg.SensorDefinition:
    """Return the sensor, ticking every `interval_seconds` (a tick moves every rollout).

    `definitions.py` passes the interval it read from the variable; the default is for
    code that uses the sensor without the code location (tests, benchmarks).
    """
    return dg.sensor(
        name="rollout_controller",
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Advances every customer's rollout in one tick: canary steps analysed from the "
        "prediction log and the materialized actuals, promotion or rollback.",
    )(_tick)


rollout_controller = build_rollout_controller()
