"""Which customers are busy training: no new decision for them until they are done.

Busy means a training machine that has not reached a terminal state (a job submitted, being
polled or downloaded, or a candidate waiting for its run, gate and registration), or a
`training_job` run for the customer that has not finished (queued or running, launched by the
policy or by a person). A machine that ended DONE or FAILED leaves the customer free.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from retrain_assets.asset_keys import TRAINING_JOB
from retrain_assets.machines.training import NAME as TRAINING
from retrain_assets.store.database import transaction

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


def unfinished_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    """Return every run that is queued or in progress (one query; a tick shares it)."""
    return list(instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED)))


def training_runs_in_progress(
    instance: dg.DagsterInstance, runs: Sequence[dg.DagsterRun] | None = None
) -> dict[str, str]:
    """Return customer -> run id for every unfinished run that materializes `training_job`."""
    busy: dict[str, str] = {}
    for run in unfinished_runs(instance) if runs is None else runs:
        selection = set(run.asset_selection or ())
        customer = run.tags.get(PARTITION_TAG)
        if TRAINING_JOB in selection and customer:
            busy[customer] = run.run_id
    return busy


def busy_customers(
    url: str, instance: dg.DagsterInstance, runs: Sequence[dg.DagsterRun] | None = None
) -> dict[str, str]:
    """Return customer -> why it is busy, for every customer that must not get a decision.

    `runs`: the unfinished runs when the caller already read them (`unfinished_runs`).
    """
    reasons = {
        customer: f"training machine in {state}"
        for customer, state in machines_in_progress(url).items()
    }
    for customer, run_id in training_runs_in_progress(instance, runs).items():
        reasons.setdefault(customer, f"training_job run {run_id} not finished")
    return reasons
