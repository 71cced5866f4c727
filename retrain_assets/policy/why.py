"""`retrain-assets policy why NAME`: one customer's reason, as the policy's next tick sees it.

The tick's log counts the customers who wait rather than naming each one; a person who wants
one customer's reason asks here. The answer comes from the tick's own evaluation
(`evaluation.py`: the same reads, settled-data and busy checks and rule), read now. It records
nothing and requests nothing: no decision, no drift alert, no drift baseline, no run.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import dagster as dg

from retrain_assets.customers import (
    CUSTOMER_PARTITIONS,
    refused_partition_message,
    split_customer_partitions,
)
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.policy.alerts import DriftAlert
from retrain_assets.policy.busy import unfinished_runs
from retrain_assets.policy.decisions import open_decisions
from retrain_assets.policy.dispatch import launched_runs
from retrain_assets.policy.drift import DayFrames
from retrain_assets.policy.evaluation import error_line, held_reason, read_state
from retrain_assets.policy.rule import APPROVAL_JOB, Outcome
from retrain_assets.store.snapshots import latest_snapshots

LOCATION = "retrain_assets"  # the code location's name in the Dagster UI


class UnknownCustomer(ValueError):
    """The policy never evaluates this name: no `customers` partition, or an unsafe one."""


@dataclass(frozen=True)
class Answer:
    """What `policy why` prints, and whether the policy could evaluate the customer at all."""

    lines: list[str]
    evaluated: bool = True


def explain(
    url: str,
    instance: dg.DagsterInstance,
    store: ParquetPartitionStore,
    customer: str,
    now: dt.datetime | None = None,
) -> Answer:
    """Return the verdict and reason the policy gives the customer now.

    Raises:
        UnknownCustomer: the name has no `customers` partition, or one the policy refuses.
    """
    _check_known(instance, customer)
    published = latest_snapshots(url)
    runs = unfinished_runs(instance)
    held = held_reason(instance, published, runs)
    if held:
        return Answer([f"{customer}: no decision now (for any customer)", held])
    opened = open_decisions(url, customer)
    launched = launched_runs(instance, opened)
    waiting = [d for d in opened if d.id not in launched]
    state = read_state(url, instance, published, runs, waiting, DayFrames(store))
    try:
        outcome = state.outcome(customer, now or dt.datetime.now(dt.UTC))
    except Exception as err:  # what the tick logs as this customer's error
        verdict = f"{customer}: the policy could not evaluate it: {err!r}"
        return Answer([verdict, error_line(customer, err)], evaluated=False)
    lines = [_verdict(customer, outcome), f"{customer}: {outcome.reason}"]
    alert = state.alerts.get(customer)
    if alert is not None:
        lines.append(approval_hint(alert))
    return Answer(lines)


def _check_known(instance: dg.DagsterInstance, customer: str) -> None:
    """Refuse a name the tick would not evaluate, saying why."""
    safe, refused = split_customer_partitions([customer])
    if refused:
        raise UnknownCustomer(refused_partition_message(customer))
    if not safe or not instance.has_dynamic_partition(CUSTOMER_PARTITIONS, customer):
        raise UnknownCustomer(
            f"unknown customer {customer!r}: no `customers` partition in Dagster, so the "
            "retraining policy never evaluates it (`retrain-assets customers add`, or land "
            "its files)"
        )


def _verdict(customer: str, outcome: Outcome) -> str:
    """Say what the next tick would do for the customer, in one line."""
    if outcome.action == "decide":
        return (
            f"{customer}: would decide now, policy {outcome.policy} ({outcome.kind}); the next "
            "retraining_policy tick records the decision and requests training_job"
        )
    if outcome.action == "alert":
        return (
            f"{customer}: would raise a drift alert (no decision: a person approves it with "
            f"{APPROVAL_JOB})"
        )
    return f"{customer}: no decision now ({outcome.kind})"


def approval_hint(alert: DriftAlert) -> str:
    """Say how a person approves the customer's pending drift alert."""
    return (
        f"drift alert {alert.id} waits for approval: in the Dagster UI open the launchpad of "
        f"{APPROVAL_JOB} (/locations/{LOCATION}/jobs/{APPROVAL_JOB}/playground), choose "
        f"partition {alert.customer} and launch the run; it is refused while the customer is "
        "busy"
    )
