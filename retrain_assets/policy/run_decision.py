"""The decision a `training_job` run trains for: the one it was launched with, or a manual one.

A run launched by the policy names its decision and takes it up (once). A person who
materializes `training_job` from the UI without one has decided too: that is recorded as a
manual decision with the same snapshot choice, before anything is trained.
"""

from __future__ import annotations

import dagster as dg

from retrain_assets.policy.decisions import (
    Decision,
    DecisionRefused,
    claim_decision,
    decision_of_runs,
    record_decision,
)
from retrain_assets.policy.history import choose_window
from retrain_assets.policy.thresholds import settings_for
from retrain_assets.store.snapshot_ref import SnapshotRef, SnapshotUnavailable
from retrain_assets.store.snapshots import latest_snapshots

USER_TAG = "dagster/user"
MANUAL_BY = "manual via the Dagster UI"


def lineage(run: dg.DagsterRun) -> set[str]:
    """Return the ids of the runs this one re-executes (parent and root), if any."""
    return {
        run_id
        for run_id in (run.tags.get("dagster/parent_run_id"), run.tags.get("dagster/root_run_id"))
        if run_id
    }


def claim_for_run(
    url: str,
    customer: str,
    decision_id: int,
    requested: tuple[str | None, str | None, dict[str, str]],
    run: dg.DagsterRun,
) -> Decision:
    """Take up the run's decision; the run config's days, if given, must be the decision's.

    Raises:
        DecisionRefused: the decision is unknown, another customer's, used by another run, or
            names another snapshot than the run config.
    """
    decision = claim_decision(url, decision_id, customer, run.run_id, lineage(run))
    first, last, versions = requested
    ref = decision.snapshot
    given = {
        "first_day": (first, ref.first_day.isoformat()),
        "last_day": (last, ref.last_day.isoformat()),
        "data_versions": (versions or None, ref.data_versions),
    }
    differs = sorted(name for name, (mine, theirs) in given.items() if mine and mine != theirs)
    if differs:
        raise DecisionRefused(
            f"run config {differs} differ(s) from decision {decision_id}'s snapshot "
            f"{ref.first_day} .. {ref.last_day}; leave them out or give the decision's"
        )
    return decision


def manual_decision(url: str, customer: str, ref: SnapshotRef, run: dg.DagsterRun) -> Decision:
    """Record (or, for a re-execution, find) the manual decision behind a run without one."""
    earlier = decision_of_runs(url, customer, lineage(run) | {run.run_id})
    if earlier is not None:
        return earlier
    who = run.tags.get(USER_TAG) or MANUAL_BY
    reason = f"training_job materialized for {customer} without a decision (run {run.run_id})"
    return record_decision(
        url, customer, "manual", reason, ref, who, {"run_id": run.run_id}, run.run_id
    )


def policy_window(url: str, customer: str) -> SnapshotRef:
    """Return the snapshot the policy would choose for the customer now (its window_days).

    Raises:
        SnapshotUnavailable: nothing is published yet.
    """
    published = latest_snapshots(url)
    if not published:
        raise SnapshotUnavailable("no feature snapshot is published yet: materialize features")
    return choose_window(published, settings_for(url, customer).window_days)
