"""`retraining_policy`: the only thing that starts training on its own.

Each tick reads the published snapshots, every customer's last decision, its settings and
whether it is busy; it records a decision (with its reason and snapshot) or a drift alert, or
says why it skipped, and requests `training_job` for every decision not yet launched. While a
run or backfill is publishing feature days, nobody gets a decision (settled data only).
"""

import bisect
import datetime as dt
import time

import dagster as dg

from retrain_assets.automation.intervals import POLICY, interval_seconds
from retrain_assets.customers import (
    CUSTOMER_PARTITIONS,
    refused_partition_message,
    split_customer_partitions,
)
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.policy.alerts import pending_alerts, raise_alert
from retrain_assets.policy.busy import busy_customers, unfinished_runs
from retrain_assets.policy.decisions import (
    Decision,
    DecisionRefused,
    latest_decisions,
    open_decisions,
    record_decision,
)
from retrain_assets.policy.dispatch import DECISION_TAG, requests_for_open, training_request
from retrain_assets.policy.drift import Baselines, DayFrames, DriftMeasure, measure_drift
from retrain_assets.policy.history import Published, choose_window
from retrain_assets.policy.rule import Outcome, policy_outcome
from retrain_assets.policy.settled import publishing_work
from retrain_assets.policy.thresholds import DEFAULTS, all_settings
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets.store.snapshots import latest_snapshots

DECIDED_BY = "retraining_policy sensor"
TICK_BUDGET_SECONDS = 40.0  # Dagster cancels a sensor evaluation after 60 s
SHOWN_REASONS = 20  # in the skip reason; the tick log has every customer's
REASONS_PER_LOG_LINE = 100  # a readable line per 100 customers rather than one huge line
clock = time.monotonic  # the tick budget's clock (tests replace it)


def policy_interval_seconds() -> int:
    """Return the tick interval from ${var} (default 300).

    Raises:
        InvalidInterval: the variable is not a positive whole number.
    """
    return interval_seconds(POLICY)


def _tick(
    context: dg.SensorEvaluationContext,
    project_db: ProjectDatabase,
    partition_storage: PartitionStorage,
) -> dg.SensorResult:
    """Decide for every customer; request training for every decision not yet launched."""
    started = clock()
    url, instance = project_db.connection_url(), context.instance
    requests = requests_for_open(url, instance, open_decisions(url))
    published = latest_snapshots(url)
    customers, refused = split_customer_partitions(
        instance.get_dynamic_partitions(CUSTOMER_PARTITIONS)
    )
    for key in refused:  # added by hand in the UI: never decided for, never trained
        context.log.error(refused_partition_message(key))
    if not published or not customers:
        what = "feature snapshot is published" if not published else "customer is known"
        return _result(context, requests, f"no {what} yet", context.cursor)
    runs = unfinished_runs(instance)
    publishing = publishing_work(instance, runs)
    if publishing:
        reason = (
            "no decision while feature days are being published (decisions wait for settled "
            f"data): {'; '.join(publishing)}"
        )
        return _result(context, requests, reason, context.cursor)
    busy = busy_customers(url, instance, runs)
    for request in requests:
        decision_id = request.tags[DECISION_TAG]
        busy.setdefault(str(request.partition_key), f"decision {decision_id} waiting for its run")
    latest, alerts, settings = latest_decisions(url), pending_alerts(url), all_settings(url)
    frames = DayFrames(partition_storage.store())
    baselines = Baselines(url, frames, [d.id for d in latest.values()])

    def drift_of(last: Decision, recent: list[dt.date]) -> DriftMeasure:
        baseline = baselines.stored(last.id)
        if baseline is None:  # the window's days are parsed only when its baseline is new
            window = sorted(dt.date.fromisoformat(d) for d in last.data_versions)
            baseline = baselines.of(last.id, last.customer, window)
        return measure_drift(baseline, last.customer, recent, frames)

    reasons: list[str] = []
    cursor = ""  # the first customer this tick did not reach: the next tick starts there
    now = dt.datetime.now(dt.UTC)
    for customer in in_turn(customers, context.cursor):
        if cursor or clock() - started > TICK_BUDGET_SECONDS:
            cursor = cursor or customer
            reasons.append(f"{customer}: deferred to the next tick (tick budget used)")
            continue
        choice = settings.get(customer, DEFAULTS)
        try:
            outcome = policy_outcome(
                customer,
                choice,
                published,
                latest.get(customer),
                alerts.get(customer),
                busy.get(customer),
                now,
                drift_of,
            )
            line = _act(context, url, customer, outcome, published, choice.window_days, requests)
        except Exception as err:  # one customer's failure must not stop the others' decisions
            context.log.error(f"{customer}: the policy could not evaluate: {err!r}")
            line = f"{customer}: error: {err}"
        reasons.append(line)
    saved = baselines.save()
    context.log.info(
        f"{len(requests)} training request(s), {len(reasons)} customer(s), "
        f"{saved} new drift baseline(s)"
    )
    for start in range(0, len(reasons), REASONS_PER_LOG_LINE):
        shown_here = reasons[start : start + REASONS_PER_LOG_LINE]
        context.log.info(
            f"customers {start + 1}-{start + len(shown_here)} of {len(reasons)}: "
            + "; ".join(shown_here)
        )
    shown = reasons[:SHOWN_REASONS]
    more = len(reasons) - len(shown)
    skip_reason = "; ".join(shown) + (f"; ... and {more} more (see the tick log)" if more else "")
    return _result(context, requests, skip_reason, cursor)


def _result(
    context: dg.SensorEvaluationContext,
    requests: list[dg.RunRequest],
    skip_reason: str,
    cursor: str | None,
) -> dg.SensorResult:
    """Return the tick's result: its requests, else the skip reason (Dagster takes one of them).

    A SensorResult with both raises, so with requests the reason goes to the tick's log.
    """
    if requests:
        context.log.info(f"{len(requests)} training request(s); otherwise: {skip_reason}")
        return dg.SensorResult(run_requests=requests, cursor=cursor)
    return dg.SensorResult(skip_reason=skip_reason, cursor=cursor)


def in_turn(customers: list[str], cursor: str | None) -> list[str]:
    """Return the sorted customers starting at `cursor`, wrapping around.

    The cursor names the first customer a tick out of budget did not reach, so customers late
    in the alphabet are not starved when one tick cannot evaluate everybody.
    """
    if not cursor:
        return customers
    at = bisect.bisect_left(customers, cursor)
    return customers[at:] + customers[:at]


def _act(
    context: dg.SensorEvaluationContext,
    url: str,
    customer: str,
    outcome: Outcome,
    published: Published,
    window_days: int,
    requests: list[dg.RunRequest],
) -> str:
    """Carry out one outcome; return the line that says what happened."""
    if outcome.action == "alert" and outcome.drift is not None:
        alert = raise_alert(
            url,
            customer,
            int(outcome.details["decision_id"]),
            outcome.drift,
            float(outcome.details["threshold"]),
        )
        context.log.warning(f"{customer}: drift alert {alert.id}: {outcome.reason}")
        return f"{customer}: {outcome.reason}"
    if outcome.action == "skip" or outcome.policy is None:
        return f"{customer}: {outcome.reason}"
    ref = choose_window(published, window_days)
    try:
        decision = record_decision(
            url, customer, outcome.policy, outcome.reason, ref, DECIDED_BY, outcome.details
        )
    except DecisionRefused as err:  # another evaluation decided for it a moment ago
        return f"{customer}: {err}"
    requests.append(training_request(decision))
    context.log.info(f"{customer}: decision {decision.id} ({decision.policy}): {outcome.reason}")
    return f"{customer}: decision {decision.id}: {outcome.reason}"


def build_retraining_policy(interval_seconds: int = POLICY.default) -> dg.SensorDefinition:
    """Return the sensor, ticking every `interval_seconds` (each decides per customer).

    `definitions.py` passes the interval it read from the variable; the default is for
    code that uses the sensor without the code location (tests, benchmarks).
    """
    return dg.sensor(
        name="retraining_policy",
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        asset_selection=[training_job],
        description="Decides per customer (schedule, new-data volume, approved drift) when to "
        "train; records each decision and requests training_job with the decision id as run_key.",
    )(_tick)


retraining_policy = build_retraining_policy()
