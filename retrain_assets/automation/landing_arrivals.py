"""`landing_arrivals`: new and changed landing days become `sales` + `store_day_features` runs.

Each tick lists every known customer's landing folder once, works out which days are ready
(complete and settled, see `landing_days`) and which of those changed since they were last
requested (the sensor's cursor holds each day's fingerprint), and requests one run per
contiguous range of them: `sales` and `store_day_features` over the range, so a fresh
platform's 120 landed days are one run. Feature days left behind by a re-read day (the 28
days after a late file) get a `store_day_features` run of their own once that run is done.

Run keys name the range and what it was computed from, so a re-evaluated tick never launches
a run twice, and a run that failed is not relaunched until its inputs change. The sensor
waits while one of its runs is unfinished: the next tick takes up everything that arrived
meanwhile. Only the data side is selected; nothing here can start a model run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping

import dagster as dg

from retrain_assets.asset_keys import SALES, STORE_DAY_FEATURES
from retrain_assets.automation.feature_staleness import (
    follow_up_days,
    lookback_storage_ids,
    stale_feature_days,
)
from retrain_assets.automation.intervals import LANDING
from retrain_assets.automation.landing_days import (
    DayRange,
    LandingPlan,
    contiguous_ranges,
    landing_days,
    plan_landing,
)
from retrain_assets.automation.landing_scan import scan_landing
from retrain_assets.automation.landing_settings import (
    day_cutoff_hours,
    landing_automation_enabled,
    landing_settle_seconds,
)
from retrain_assets.customers import CUSTOMER_PARTITIONS
from retrain_assets.settings import landing_root

NAME = "landing_arrivals"
FEATURES_JOB = "features_job"  # defined in retrain_assets.definitions (which imports this)
AUTOMATION_TAG = "retrain/automation"  # on every run this sensor requests: data-side automation
TRIGGER_TAG = "retrain/trigger"  # `landing` (files read) or `features_behind_sales`
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
SHOWN_DAYS = 10  # days named in a tick's summary; the log names them all
UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def utc_now() -> dt.datetime:
    """Return the current time (tests replace this to stand before or after a cut-off)."""
    return dt.datetime.now(dt.UTC)


def requested_fingerprints(cursor: str | None) -> dict[dt.date, str]:
    """Return the fingerprint last requested for each day, from the sensor's cursor."""
    if not cursor:
        return {}
    return {dt.date.fromisoformat(k): v for k, v in json.loads(cursor)["requested"].items()}


def _cursor(requested: Mapping[dt.date, str]) -> str:
    return json.dumps({"requested": {d.isoformat(): fp for d, fp in sorted(requested.items())}})


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _tags(days: DayRange, trigger: str) -> dict[str, str]:
    # A run that never got to its steps (it timed out starting, its worker died) is retried by
    # the daemon up to 3 times (dagster.yaml enables run retries, 0 by default); a failed step
    # (a bad file, a missing day) is final until the inputs change, as the run key says.
    return {
        RANGE_START: days[0].isoformat(),
        RANGE_END: days[1].isoformat(),
        AUTOMATION_TAG: NAME,
        TRIGGER_TAG: trigger,
        "dagster/max_retries": "3",
        "dagster/retry_on_asset_or_op_failure": "false",
    }


def landing_request(days: DayRange, plan: LandingPlan) -> dg.RunRequest:
    """Return the run reading one range of landed days: `sales` and `store_day_features`."""
    first, last = days
    prints = [fp for day, fp in sorted(plan.fingerprints.items()) if first <= day <= last]
    return dg.RunRequest(
        run_key=f"landing-{first}-{last}-{_digest(prints)}",
        asset_selection=[SALES, STORE_DAY_FEATURES],
        tags=_tags(days, "landing"),
    )


def features_request(
    days: DayRange, sales_ids: Mapping[dt.date, int], feature_ids: Mapping[dt.date, int]
) -> dg.RunRequest:
    """Return the run recomputing feature days behind their sales (`store_day_features` only).

    The key covers the sales and feature events the days were judged by, so a failed run is
    requested again only after one of them changes.
    """
    first, last = days
    span = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    parts = [f"{day}:{lookback_storage_ids(sales_ids, day)}:{feature_ids.get(day)}" for day in span]
    return dg.RunRequest(
        run_key=f"features-{first}-{last}-{_digest(parts)}",
        asset_selection=[STORE_DAY_FEATURES],
        tags=_tags(days, "features_behind_sales"),
    )


def unfinished_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    """Return this sensor's runs that have not finished (queued, starting or running)."""
    return list(
        instance.get_runs(
            filters=dg.RunsFilter(tags={AUTOMATION_TAG: NAME}, statuses=UNFINISHED), limit=5
        )
    )


def _storage_ids(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[dt.date, int]:
    latest = instance.get_latest_storage_id_by_partition(
        key, dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    return {dt.date.fromisoformat(day): storage_id for day, storage_id in latest.items()}


def _grouped(reasons: Mapping[dt.date, str]) -> list[tuple[DayRange, str]]:
    """Return consecutive days with the same reason as one range (a log line, not 120)."""
    groups: list[tuple[DayRange, str]] = []
    for day, why in sorted(reasons.items()):
        if groups and groups[-1][1] == why and groups[-1][0][1] + dt.timedelta(days=1) == day:
            groups[-1] = ((groups[-1][0][0], day), why)
        else:
            groups.append(((day, day), why))
    return groups


def _describe(ranges: list[DayRange]) -> str:
    return ", ".join(f"{a}" if a == b else f"{a} .. {b}" for a, b in ranges)


def _summary(plan: LandingPlan, behind: list[dt.date], follow: list[DayRange]) -> str:
    parts = []
    if plan.ranges:
        parts.append(f"reading {len(plan.days)} day(s): {_describe(plan.ranges)}")
    if plan.late:
        parts.append(f"late or changed files on {_describe(contiguous_ranges(plan.late))}")
    if follow:
        parts.append(f"recomputing features behind their sales: {_describe(follow)}")
    elif behind:
        parts.append(f"{len(behind)} feature day(s) behind sales wait for this tick's reads")
    waiting = sorted(plan.waiting.items())
    if waiting:
        shown = "; ".join(f"{day}: {why}" for day, why in waiting[:SHOWN_DAYS])
        more = f"; and {len(waiting) - SHOWN_DAYS} more" if len(waiting) > SHOWN_DAYS else ""
        parts.append(f"{len(waiting)} day(s) waiting: {shown}{more}")
    return "; ".join(parts) or "no new or changed landing day, no feature day behind its sales"


def _tick(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """Request runs for ready days whose files changed and for feature days behind sales."""
    if not landing_automation_enabled():
        return dg.SensorResult(
            skip_reason="RETRAIN_LANDING_AUTOMATION is off: days are published by hand"
        )
    instance = context.instance
    busy = unfinished_runs(instance)
    if busy:
        run = busy[-1]
        days = f"{run.tags.get(RANGE_START)} .. {run.tags.get(RANGE_END)}"
        return dg.SensorResult(
            skip_reason=f"waiting for run {run.run_id} ({days}) to finish; what arrives "
            "meanwhile is read by the next tick after it"
        )
    customers = sorted(instance.get_dynamic_partitions(CUSTOMER_PARTITIONS))
    requested = requested_fingerprints(context.cursor)
    plan = plan_landing(
        landing_days(scan_landing(landing_root(), customers)),
        requested,
        utc_now(),
        day_cutoff_hours(),
        landing_settle_seconds(),
    )
    sales_ids = _storage_ids(instance, SALES)
    feature_ids = _storage_ids(instance, STORE_DAY_FEATURES)
    behind = stale_feature_days(sales_ids, feature_ids)
    follow = contiguous_ranges(follow_up_days(behind, plan.days))
    requests = [landing_request(days, plan) for days in plan.ranges]
    requests += [features_request(days, sales_ids, feature_ids) for days in follow]
    summary = _summary(plan, behind, follow)
    context.log.info(f"{len(customers)} customer(s); {summary}")
    for day_range, why in _grouped(plan.reasons):
        context.log.info(f"{_describe([day_range])}: {why}")
    cursor = _cursor({**requested, **plan.fingerprints})
    if not requests:
        return dg.SensorResult(skip_reason=summary, cursor=cursor)
    return dg.SensorResult(run_requests=requests, cursor=cursor)


def build_landing_arrivals(interval_seconds: int = LANDING.default) -> dg.SensorDefinition:
    """Return the sensor, ticking every `interval_seconds` (a tick looks at the landing zone).

    `definitions.py` passes the interval it read from the variable; the default is for
    code that uses the sensor without the code location (tests, benchmarks).
    """
    return dg.sensor(
        minimum_interval_seconds=interval_seconds,
        name=NAME,
        default_status=dg.DefaultSensorStatus.RUNNING,
        job_name=FEATURES_JOB,
        description="Reads each landing day once it is complete (every active customer delivered, "
        "or its cut-off passed) and again when a late file changes it: one sales + "
        "store_day_features run per day range. The data side only.",
    )(_tick)


landing_arrivals = build_landing_arrivals()
