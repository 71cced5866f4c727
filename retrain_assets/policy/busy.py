"""Which customers are busy training: no new decision for them until they are done.

Busy means a training machine that has not reached a terminal state (a job submitted, being
polled or downloaded), or a `training_job` run for the customer that has not finished (queued
or running, launched by the policy or by a person).
"""

from __future__ import annotations

import dagster as dg

from retrain_assets.machines.training import NAME as TRAINING
from retrain_assets.store.database import transaction

TRAINING_JOB_ASSET = "training_job"
PARTITION_TAG = "dagster/partition"
UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def machines_in_progress(url: str) -> dict[str, str]:
    """Return customer -> state for every training machine not in a terminal state."""
    with transaction(url) as cur:
        cur.execute(
            "SELECT customer, state FROM machine_pointers WHERE machine = %s"
            " AND status <> 'terminal'",
            (TRAINING,),
        )
        return dict(cur.fetchall())


def training_runs_in_progress(instance: dg.DagsterInstance) -> dict[str, str]:
    """Return customer -> run id for every unfinished run that materializes `training_job`."""
    busy: dict[str, str] = {}
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED)):
        selection = {key.to_user_string() for key in run.asset_selection or ()}
        customer = run.tags.get(PARTITION_TAG)
        if TRAINING_JOB_ASSET in selection and customer:
            busy[customer] = run.run_id
    return busy


def busy_customers(url: str, instance: dg.DagsterInstance) -> dict[str, str]:
    """Return customer -> why it is busy, for every customer that must not get a decision."""
    reasons = {
        customer: f"training machine in {state}"
        for customer, state in machines_in_progress(url).items()
    }
    for customer, run_id in training_runs_in_progress(instance).items():
        reasons.setdefault(customer, f"training_job run {run_id} not finished")
    return reasons
