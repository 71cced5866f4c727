"""Settled data: the policy decides nothing while feature days are still being published.

A day of `store_day_features` holds every customer's rows, so a run that publishes feature
days (a daily run, an automated one, a backfill) changes what every customer's next decision
would see. A decision taken half-way through a 120-day history backfill chose a window on the
days published so far, and the rest of that history then counted as new data. So the tick
looks, once, at the runs that are queued or in progress and at the backfills not yet done,
and while any of them publishes `sales` or `store_day_features` no customer gets a decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import dagster as dg

from retrain_assets.asset_keys import SALES, STORE_DAY_FEATURES, name_of
from retrain_assets.dagster_private import BulkActionStatus, PartitionBackfill

FEATURE_ASSETS = frozenset(name_of(key) for key in (SALES, STORE_DAY_FEATURES))
FEATURE_JOBS = frozenset({"features_job"})  # retrain_assets.definitions.FEATURES_JOB
BACKFILL_TAG = "dagster/backfill"


def run_assets(instance: dg.DagsterInstance, run: dg.DagsterRun) -> frozenset[str]:
    """Return the assets a run materializes (its selection, else its execution plan's outputs).

    A run of a whole asset job records no selection; its plan, stored when the run was
    created (queued runs included), names the assets each step outputs.
    """
    if run.asset_selection:
        return frozenset(key.to_user_string() for key in run.asset_selection)
    if not run.execution_plan_snapshot_id:
        return frozenset()
    plan = instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
    return frozenset(
        output.properties.asset_key.to_user_string()
        for step in plan.steps
        for output in step.outputs
        if output.properties is not None and output.properties.asset_key is not None
    )


def publishing_work(instance: dg.DagsterInstance, unfinished: Sequence[dg.DagsterRun]) -> list[str]:
    """Describe every unfinished run and pending backfill that publishes feature days.

    `unfinished` are the runs that are queued or in progress (the caller's one query). A
    backfill still REQUESTED counts while some feature asset it targets has no run of it yet
    (the daemon launches runs on its own schedule; its launched runs are in `unfinished` for
    as long as they go on).
    """
    found = []
    for run in unfinished:
        publishes = sorted(run_assets(instance, run) & FEATURE_ASSETS)
        if publishes:
            found.append(f"run {run.run_id} ({', '.join(publishes)}, {run.status.value})")
    requested = instance.get_backfills(status=BulkActionStatus.REQUESTED)
    for backfill in requested:
        targets = _backfill_targets(backfill) & FEATURE_ASSETS
        if not targets:
            continue
        mine = dg.RunsFilter(tags={BACKFILL_TAG: backfill.backfill_id})
        launched = instance.get_runs(filters=mine)
        waiting = targets - _union(run_assets(instance, run) for run in launched)
        if waiting:
            found.append(
                f"backfill {backfill.backfill_id} ({', '.join(sorted(waiting))}, not launched yet)"
            )
    return found


def _backfill_targets(backfill: PartitionBackfill) -> frozenset[str]:
    if backfill.asset_selection:
        return frozenset(key.to_user_string() for key in backfill.asset_selection)
    origin = backfill.partition_set_origin
    name = origin.partition_set_name if origin is not None else ""
    if any(name == f"{job}_partition_set" for job in FEATURE_JOBS):
        return FEATURE_ASSETS
    return frozenset()


def _union(sets: Iterable[frozenset[str]]) -> frozenset[str]:
    return frozenset().union(*sets)
