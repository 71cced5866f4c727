"""Turning open decisions into `training_job` run requests, exactly once per decision.

The decision id is the request's `run_key`, so Dagster itself never launches two runs for one
decision; a decision whose run exists (found by its tag) is marked as taken and not requested
again. An open decision left by a tick that died before its request was launched is simply
requested by the next tick.
"""

from __future__ import annotations

import dagster as dg

from retrain_assets.asset_keys import TRAINING_JOB, name_of
from retrain_assets.policy.decisions import Decision, mark_launched

DECISION_TAG = "retrain/decision_id"
POLICY_TAG = "retrain/policy"


def training_request(decision: Decision) -> dg.RunRequest:
    """Return the run request that trains a decision's snapshot."""
    ref = decision.snapshot
    config = {
        "first_day": ref.first_day.isoformat(),
        "last_day": ref.last_day.isoformat(),
        "data_versions": ref.data_versions,
        "decision_id": decision.id,
    }
    return dg.RunRequest(
        run_key=decision.run_key,
        asset_selection=[TRAINING_JOB],
        partition_key=decision.customer,
        run_config={"ops": {name_of(TRAINING_JOB): {"config": config}}},
        tags={
            "customer": decision.customer,
            DECISION_TAG: str(decision.id),
            POLICY_TAG: decision.policy,
        },
    )


def launched_runs(instance: dg.DagsterInstance, opened: list[Decision]) -> dict[int, str]:
    """Return decision id -> run id of the open decisions whose run exists (a read only)."""
    if not opened:
        return {}
    runs = instance.get_runs(
        filters=dg.RunsFilter(tags={DECISION_TAG: [str(d.id) for d in opened]})
    )
    return {int(run.tags[DECISION_TAG]): run.run_id for run in runs}


def not_launched(url: str, instance: dg.DagsterInstance, opened: list[Decision]) -> list[Decision]:
    """Mark open decisions whose run exists as taken up; return the others, still to request."""
    launched = launched_runs(instance, opened)
    if launched:
        mark_launched(url, launched)
    return [d for d in opened if d.id not in launched]
