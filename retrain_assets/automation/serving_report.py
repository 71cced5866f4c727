"""`serving_report`: tell the UI, per customer, what serves and whether it is fresh.

Each tick reads the champion moves and judges every customer's freshness (a few grouped
queries, `models/freshness.py`), reads what Dagster shows (`models/freshness_report.py`), and
says only what Dagster does not hold yet:
- a champion move that is not the partition's latest `deployed_model` materialization becomes
  one (the version serving, since when, the decision and rollout behind it), so the Partitions
  tab says what serves, whoever moved the champion (a promotion, a first deployment);
- a verdict Dagster does not show (changed, or aimed at an older materialization) is reported
  by a run of `serving_freshness_job`, requested when none is queued or in progress. The daemon
  stores a tick's materializations before it launches its runs, so the run aims each verdict at
  the partition's latest materialization (Dagster shows a check's partition passed or failed
  only then; otherwise "missing").
What the daemon failed to store (it died after the tick returned, or storing failed) is said
again by the next tick, which finds it missing; what it stored is never said twice.
"""

from __future__ import annotations

import dagster as dg

from retrain_assets.asset_keys import DEPLOYED_MODEL
from retrain_assets.automation.intervals import SERVING, interval_seconds
from retrain_assets.customers import CUSTOMER_PARTITIONS
from retrain_assets.models.freshness import Serving, judge_freshness
from retrain_assets.models.freshness_report import (
    MOVE_KEY,
    report_in_flight,
    serving_freshness_job,
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
    """Materialize champion moves and request a report of the verdicts Dagster does not show."""
    customers = sorted(context.instance.get_dynamic_partitions(CUSTOMER_PARTITIONS))
    if not customers:
        return dg.SensorResult(skip_reason="no customer yet")
    verdicts = judge_freshness(project_db.connection_url(), customers)
    now = shown(context.instance)
    moved = unmaterialized(verdicts, now)
    events = [materialization(c, serving) for c in moved if (serving := verdicts[c].serving)]
    stale = unreported(verdicts, now)
    in_flight = bool(stale) and report_in_flight(context.instance)
    counts = {s: sum(1 for v in verdicts.values() if v.severity == s) for s in ("warn", "error")}
    summary = (
        f"{len(customers)} customer(s): {len(customers) - counts['warn'] - counts['error']} "
        f"fresh, {counts['warn']} warning, {counts['error']} error; {len(moved)} champion "
        f"move(s) materialized, {len(stale)} verdict(s) to report"
        + (f" ({', '.join(stale[:SHOWN])}{', ...' if len(stale) > SHOWN else ''})") * bool(stale)
        + "; a report run is already queued or in progress" * in_flight
    )
    context.log.info(summary)
    if stale and not in_flight:
        return dg.SensorResult(run_requests=[dg.RunRequest()], asset_events=events)
    return dg.SensorResult(skip_reason=summary, asset_events=events)


def build_serving_report(interval_seconds: int = SERVING.default) -> dg.SensorDefinition:
    """Return the sensor, ticking every `interval_seconds`."""
    return dg.sensor(
        name="serving_report",
        job=serving_freshness_job,
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Materializes deployed_model when a customer's champion moves and requests "
        "serving_freshness_job when a customer's serving_model_fresh verdict is not shown yet.",
    )(_tick)


serving_report = build_serving_report()
