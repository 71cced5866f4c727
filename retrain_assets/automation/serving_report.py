"""`serving_report`: tell the UI, per customer, what serves and whether it is fresh.

Each tick reads the champion moves and judges every customer's freshness (a few grouped
queries, `models/freshness.py`), reads what Dagster shows (`models/freshness_report.py`), and
says only what Dagster does not hold yet:
- a champion move that is not the partition's latest `deployed_model` materialization becomes
  one (the version serving, since when, the decision and rollout behind it), so the Partitions
  tab says what serves, whoever moved the champion (a promotion, a first deployment);
- a verdict Dagster does not show (changed, or aimed at an older materialization) is reported
  by a run of `serving_freshness_job` the tick executes in process (no run process of its own;
  `models/freshness_report.py` says why). A customer whose move this tick materializes is
  reported by the next tick: the daemon stores a tick's materializations after it returns, and
  a verdict must be aimed at the partition's latest materialization (Dagster shows a check's
  partition passed or failed only then; otherwise "missing").
What the daemon failed to store (it died after the tick returned, or storing failed) is said
again by the next tick, which finds it missing; what it stored is never said twice.
"""

from __future__ import annotations

import time

import dagster as dg

from retrain_assets.asset_keys import DEPLOYED_MODEL
from retrain_assets.automation.intervals import SERVING, interval_seconds
from retrain_assets.customers import CUSTOMER_PARTITIONS
from retrain_assets.models.freshness import Serving, judge_freshness
from retrain_assets.models.freshness_report import (
    MOVE_KEY,
    fail_orphaned_reports,
    report_in_process,
    shown,
    unmaterialized,
    unreported,
)
from retrain_assets.store.resource import ProjectDatabase

SHOWN = 20  # customers named in the skip reason


def serving_report_interval_seconds() -> int:
    """Return the tick interval from RETRAIN_SERVING_REPORT_INTERVAL_SECONDS (default 60)."""
    return interval_seconds(SERVING)


def materialization(customer: str, serving: Serving) -> dg.AssetMaterialization:
    """Return the `deployed_model` materialization that says the customer's champion moved."""
    metadata: dict[str, dg.RawMetadataValue] = {
        "version": serving.version,
        "serving_since": serving.since.isoformat() if serving.since else "unknown",
        "replaced": serving.from_version or "none",
        "trained_to": serving.trained_to.isoformat() if serving.trained_to else "unknown",
        "run_key": serving.run_key or "unknown",
        "deployment_decision_id": serving.decision_id or -1,
        "rollout_id": serving.rollout_id or -1,
        "decided_by": serving.decided_by or "unknown",
        MOVE_KEY: serving.move_id or -1,
    }
    return dg.AssetMaterialization(
        asset_key=DEPLOYED_MODEL,
        partition=customer,
        description=f"{customer} is served by {serving.version} (rollout {serving.rollout_id})",
        metadata=metadata,
    )


def _tick(context: dg.SensorEvaluationContext, project_db: ProjectDatabase) -> dg.SensorResult:
    """Materialize champion moves and report, in process, the verdicts Dagster does not show."""
    customers = sorted(context.instance.get_dynamic_partitions(CUSTOMER_PARTITIONS))
    if not customers:
        return dg.SensorResult(skip_reason="no customer yet")
    verdicts = judge_freshness(project_db.connection_url(), customers)
    now = shown(context.instance)
    moved = unmaterialized(verdicts, now)
    events = [materialization(c, serving) for c in moved if (serving := verdicts[c].serving)]
    waiting = set(moved)  # reported by the next tick, once the daemon stored the move
    stale = [c for c in unreported(verdicts, now) if c not in waiting]
    counts = {s: sum(1 for v in verdicts.values() if v.severity == s) for s in ("warn", "error")}
    summary = (
        f"{len(customers)} customer(s): {len(customers) - counts['warn'] - counts['error']} "
        f"fresh, {counts['warn']} warning, {counts['error']} error; {len(moved)} champion "
        f"move(s) materialized, {len(stale)} verdict(s) to report"
        + (f" ({', '.join(stale[:SHOWN])}{', ...' if len(stale) > SHOWN else ''})")
        * bool(stale)
    )
    if stale:
        summary += "; " + _report(context, project_db)
    context.log.info(summary)
    return dg.SensorResult(skip_reason=summary, asset_events=events)


def _report(context: dg.SensorEvaluationContext, project_db: ProjectDatabase) -> str:
    """Execute the report run in process; return what became of it, for the tick's reason."""
    orphans = fail_orphaned_reports(context.instance, time.time())
    result = report_in_process(context.instance, project_db)
    said = f"reported in run {result.run_id[:8]}"
    if not result.success:
        said = f"report run {result.run_id[:8]} FAILED: {_failure(result)}"
        context.log.error(said + "; the next tick reports again")
    return said + f" (marked failed: {', '.join(orphans)})" * bool(orphans)


def _failure(result: dg.ExecuteInProcessResult) -> str:
    """Return the innermost error of the run's failed step (what raised, not Dagster's wrap)."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error is not None:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            return error.message.strip()
    return "the run failed before its step (see the run's logs)"


def build_serving_report(interval_seconds: int = SERVING.default) -> dg.SensorDefinition:
    """Return the sensor, ticking every `interval_seconds`."""
    return dg.sensor(
        name="serving_report",
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Materializes deployed_model when a customer's champion moves and reports, "
        "in a serving_freshness_job run it executes itself, each serving_model_fresh verdict "
        "Dagster does not show yet.",
    )(_tick)


serving_report = build_serving_report()
