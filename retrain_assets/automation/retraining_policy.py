"""`retraining_policy`: the only thing that starts training on its own.

Each tick reads the published snapshots, every customer's last decision, its settings and
whether it is busy; it records a decision (with its reason and snapshot) or a drift alert, or
says why it skipped, and requests `training_job` for every decision not yet launched. While a
run or backfill is publishing feature days, nobody gets a decision (settled data only).

The tick's log stays small however many customers there are: it names each decision, drift
alert, error and deferred customer, and counts the others by kind in one line. One
customer's reason is `retrain-assets policy why NAME`, from the same evaluation
(`policy/evaluation.py`).
"""

import bisect
import datetime as dt
import time
from collections import Counter
from dataclasses import dataclass

import dagster as dg

from retrain_assets.automation.intervals import POLICY, interval_seconds
from retrain_assets.customers import (
    CUSTOMER_PARTITIONS,
    refused_partition_message,
    split_customer_partitions,
)
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.policy.alerts import raise_alert
from retrain_assets.policy.busy import unfinished_runs
from retrain_assets.policy.decisions import DecisionRefused, open_decisions, record_decision
from retrain_assets.policy.deferrals import clear_deferrals, record_deferral
from retrain_assets.policy.dispatch import not_launched, training_request
from retrain_assets.policy.drift import DayFrames
from retrain_assets.policy.evaluation import PolicyState, error_line, held_reason, read_state
from retrain_assets.policy.history import choose_window
from retrain_assets.policy.rule import NO_DATA, Outcome
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets.store.snapshots import latest_snapshots

DECIDED_BY = "retraining_policy sensor"
TICK_BUDGET_SECONDS = 40.0  # Dagster cancels a sensor evaluation after 60 s
SHOWN_REASONS = 20  # in the skip reason; the tick log counts the others by kind
DEFERRED_PER_LOG_LINE = 100  # deferred customers named per line of the tick log
DEFERRED, ERROR = "deferred", "error"  # kinds the tick adds to the rule's
clock = time.monotonic  # the tick budget's clock (tests replace it)


@dataclass(frozen=True)
class Evaluated:
    """One customer's result this tick: the kind the log counts, the line the UI shows."""

    customer: str
    kind: str
    line: str


def policy_interval_seconds() -> int:
    """Return the tick interval from ${var} (default 300).

    Raises:
        SettingsError: the variable (or another setting) is malformed or out of range.
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
    waiting = not_launched(url, instance, open_decisions(url))
    requests = [training_request(decision) for decision in waiting]
    published = latest_snapshots(url)
    customers, refused = split_customer_partitions(
        instance.get_dynamic_partitions(CUSTOMER_PARTITIONS)
    )
    for key in refused:  # added by hand in the UI: never decided for, never trained
        context.log.error(refused_partition_message(key))
    if published and not customers:
        return _result(context, requests, "no customer is known yet", context.cursor)
    runs = unfinished_runs(instance)
    held = held_reason(instance, published, runs)
    if held:
        return _result(context, requests, held, context.cursor)
    frames = DayFrames(partition_storage.store())
    state = read_state(url, instance, published, runs, waiting, frames)
    results, cursor = _evaluate_all(context, url, state, customers, requests, started)
    saved = state.baselines.save()
    _log_deferred(context, [r.customer for r in results if r.kind == DEFERRED])
    context.log.info(
        f"{len(requests)} training request(s), {saved} new drift baseline(s); {summary(results)}"
    )
    return _result(context, requests, skip_reason(results), cursor)


def _evaluate_all(
    context: dg.SensorEvaluationContext,
    url: str,
    state: PolicyState,
    customers: list[str],
    requests: list[dg.RunRequest],
    started: float,
) -> tuple[list[Evaluated], str]:
    """Evaluate customers in turn until the budget is used; return results and the cursor.

    The cursor is the first customer this tick did not reach: the next tick starts there.
    """
    results: list[Evaluated] = []
    cursor = ""
    now = dt.datetime.now(dt.UTC)
    for customer in in_turn(customers, context.cursor):
        if cursor or clock() - started > TICK_BUDGET_SECONDS:
            cursor = cursor or customer
            line = f"{customer}: deferred to the next tick (tick budget used)"
            results.append(Evaluated(customer, DEFERRED, line))
            continue
        try:
            outcome = state.outcome(customer, now)
            results.append(_act(context, url, customer, outcome, state, requests))
        except Exception as err:  # one customer's failure must not stop the others' decisions
            context.log.error(f"{customer}: the policy could not evaluate: {err!r}")
            results.append(Evaluated(customer, ERROR, error_line(customer, err)))
    kept = {NO_DATA, "busy", DEFERRED, ERROR}  # a busy customer's data was not looked at
    clear_deferrals(url, [r.customer for r in results if r.kind not in kept])
    return results, cursor


def summary(results: list[Evaluated]) -> str:
    """Return one line counting the customers per kind, the most frequent first."""
    counts = Counter(result.kind for result in results)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    kinds = "; ".join(f"{count:,} {kind}" for kind, count in ranked)
    return f"{len(results):,} customer(s): {kinds or 'none'}"


def skip_reason(results: list[Evaluated]) -> str:
    """Return the first customers' lines, and how many more (the log counts them by kind)."""
    shown = [result.line for result in results[:SHOWN_REASONS]]
    more = len(results) - len(shown)
    if not more:
        return "; ".join(shown)
    return (
        "; ".join(shown) + f"; ... and {more} more (counted in the tick log; "
        "`retrain-assets policy why NAME` for one)"
    )


def _log_deferred(context: dg.SensorEvaluationContext, names: list[str]) -> None:
    """Name the customers the budget did not reach, a bounded line at a time."""
    for start in range(0, len(names), DEFERRED_PER_LOG_LINE):
        chunk = names[start : start + DEFERRED_PER_LOG_LINE]
        context.log.warning(
            f"deferred to the next tick (tick budget used), {start + 1}-{start + len(chunk)} "
            f"of {len(names)}: {', '.join(chunk)}"
        )


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
    state: PolicyState,
    requests: list[dg.RunRequest],
) -> Evaluated:
    """Carry out one outcome; return what happened (decisions and alerts are logged)."""
    if outcome.action == "alert" and outcome.drift is not None:
        alert = raise_alert(
            url,
            customer,
            int(outcome.details["decision_id"]),
            outcome.drift,
            float(outcome.details["threshold"]),
        )
        context.log.warning(f"{customer}: drift alert {alert.id}: {outcome.reason}")
        return Evaluated(customer, outcome.kind, f"{customer}: {outcome.reason}")
    if outcome.kind == NO_DATA:  # visible, not scheduled: recorded until its rows arrive
        since = outcome.details.get("no_data_since")
        record_deferral(
            url,
            customer,
            outcome.reason,
            dt.date.fromisoformat(since) if since else None,
            dt.date.fromisoformat(str(outcome.details["published_up_to"])),
        )
        return Evaluated(customer, outcome.kind, f"{customer}: {outcome.reason}")
    if outcome.action == "skip" or outcome.policy is None:
        return Evaluated(customer, outcome.kind, f"{customer}: {outcome.reason}")
    ref = choose_window(state.published, state.settings_of(customer).window_days)
    try:
        decision = record_decision(
            url, customer, outcome.policy, outcome.reason, ref, DECIDED_BY, outcome.details
        )
    except DecisionRefused as err:  # another evaluation decided for it a moment ago
        return Evaluated(customer, "busy", f"{customer}: {err}")
    requests.append(training_request(decision))
    context.log.info(f"{customer}: decision {decision.id} ({decision.policy}): {outcome.reason}")
    line = f"{customer}: decision {decision.id}: {outcome.reason}"
    return Evaluated(customer, f"decided ({outcome.kind})", line)


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
