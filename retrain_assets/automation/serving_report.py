"""`serving_report`: tell the UI, per customer, what serves and whether it is fresh.

Each tick reads the champion moves and judges every customer's freshness (a few grouped
queries, `models/freshness.py`), then reports only what changed since the last report, which
`serving_reports` remembers:
- a champion move not yet shown becomes a materialization of `deployed_model` for that
  customer (the version serving, since when, the decision and rollout behind it), so the
  Partitions tab says what serves, whoever moved the champion (a promotion, a first deployment);
- a changed verdict becomes a runless evaluation of `serving_model_fresh` on that partition,
  aimed at the partition's latest materialization (Dagster shows a check's partition as
  passed or failed only when its evaluation targets the latest materialization; otherwise
  "missing"). A customer whose champion moved this tick is judged next tick, once its new
  materialization has a storage id to aim at.
The sensor launches no run. An event the daemon failed to store after the tick recorded it is
not repeated (the report is written in the tick); `serving_reports` can be cleared to redo all.
"""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg
import psycopg2.extras

from retrain_assets.asset_keys import DEPLOYED_MODEL
from retrain_assets.automation.intervals import SERVING, interval_seconds
from retrain_assets.customers import CUSTOMER_PARTITIONS
from retrain_assets.models.freshness import Freshness, Serving, judge_freshness
from retrain_assets.models.freshness_check import Target, check_evaluation
from retrain_assets.store.database import transaction
from retrain_assets.store.resource import ProjectDatabase

SHOWN = 20  # customers named in the skip reason
ReportRow = tuple[str, int | None, str | None]  # customer, move shown, verdict reported


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
        "champion_move_id": serving.move_id or -1,
    }
    return dg.AssetMaterialization(
        asset_key=DEPLOYED_MODEL,
        partition=customer,
        description=f"{customer} is served by {serving.version} (rollout {serving.rollout_id})",
        metadata=metadata,
    )


def report_events(
    verdicts: dict[str, Freshness],
    reported: dict[str, tuple[int | None, str | None]],
    latest: Mapping[str, Target] | None = None,
) -> tuple[list[dg.AssetMaterialization | dg.AssetCheckEvaluation], list[ReportRow]]:
    """Return the events that changed since `reported`, and the new report rows to write.

    `latest`: each customer's latest `deployed_model` materialization, which a verdict targets.
    """
    events: list[dg.AssetMaterialization | dg.AssetCheckEvaluation] = []
    rows: list[ReportRow] = []
    for customer, verdict in sorted(verdicts.items()):
        move_id, fingerprint = reported.get(customer, (None, None))
        serving = verdict.serving
        if serving is not None and serving.move_id is not None and serving.move_id != move_id:
            events.append(materialization(customer, serving))
            rows.append((customer, serving.move_id, None))  # its verdict: next tick
        elif verdict.fingerprint() != fingerprint:
            target = (latest or {}).get(customer)
            events.append(check_evaluation(verdict, target))
            rows.append((customer, move_id, verdict.fingerprint()))
    return events, rows


def latest_materializations(instance: dg.DagsterInstance) -> dict[str, Target]:
    """Return each customer's latest `deployed_model` materialization, for its check to aim at."""
    ids = instance.event_log_storage.get_latest_storage_id_by_partition(
        DEPLOYED_MODEL, dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    if not ids:
        return {}
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=DEPLOYED_MODEL, storage_ids=list(ids.values())),
        limit=len(ids),
    ).records
    return {
        record.partition_key: Target(
            storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
        )
        for record in records
        if record.partition_key is not None
    }


def _reported(url: str, customers: list[str]) -> dict[str, tuple[int | None, str | None]]:
    with transaction(url) as cur:
        cur.execute(
            "SELECT customer, move_id, freshness FROM serving_reports WHERE customer = ANY(%s)",
            (customers,),
        )
        return {row[0]: (row[1], row[2]) for row in cur.fetchall()}


def _record(url: str, rows: list[ReportRow]) -> None:
    if not rows:
        return
    with transaction(url) as cur:
        psycopg2.extras.execute_values(
            cur,
            "INSERT INTO serving_reports (customer, move_id, freshness) VALUES %s"
            " ON CONFLICT (customer) DO UPDATE SET move_id = EXCLUDED.move_id,"
            " freshness = EXCLUDED.freshness, reported_at = clock_timestamp()",
            rows,
            page_size=1000,
        )


def _tick(context: dg.SensorEvaluationContext, project_db: ProjectDatabase) -> dg.SensorResult:
    """Report new champion moves and changed freshness verdicts; say how many of each."""
    url = project_db.connection_url()
    customers = sorted(context.instance.get_dynamic_partitions(CUSTOMER_PARTITIONS))
    if not customers:
        return dg.SensorResult(skip_reason="no customer yet")
    verdicts = judge_freshness(url, customers)
    latest = latest_materializations(context.instance)
    events, rows = report_events(verdicts, _reported(url, customers), latest)
    _record(url, rows)
    counts = {s: sum(1 for v in verdicts.values() if v.severity == s) for s in ("warn", "error")}
    moves = sum(isinstance(e, dg.AssetMaterialization) for e in events)
    changed = [r[0] for r in rows]
    summary = (
        f"{len(customers)} customer(s): {len(customers) - counts['warn'] - counts['error']} "
        f"fresh, {counts['warn']} warning, {counts['error']} error; {moves} champion move(s) "
        f"materialized, {len(changed)} verdict(s) reported"
        + (f" ({', '.join(changed[:SHOWN])}{', ...' if len(changed) > SHOWN else ''})")
        * bool(changed)
    )
    context.log.info(summary)
    return dg.SensorResult(skip_reason=summary, asset_events=events)


def build_serving_report(interval_seconds: int = SERVING.default) -> dg.SensorDefinition:
    """Return the sensor, ticking every `interval_seconds`."""
    return dg.sensor(
        name="serving_report",
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Materializes deployed_model when a customer's champion moves and reports "
        "each customer's serving_model_fresh verdict when it changes (no run).",
    )(_tick)


serving_report = build_serving_report()
