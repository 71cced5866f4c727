"""`gpu_job_poller`: advance every customer waiting on a GPU job, with one batched status call.

Nothing else waits for the GPU: between ticks a waiting customer is one row in Postgres. A
succeeded job becomes a `model_candidate` run request (run key as Dagster `run_key`, so a
re-evaluated tick never requests it twice); a failed one is resubmitted by the machine within
its budget; past a budget the machine records FAILED with the reason.
"""

import os
import time

import dagster as dg

from retrain_assets.deployment.records import auto_deploy_ready
from retrain_assets.deployment.selection import registration_selection
from retrain_assets.gpu.protocol import JobStatus
from retrain_assets.machines.engine import advance_many
from retrain_assets.machines.store import pointers_in_state
from retrain_assets.machines.training import JOB_ID, NAME, training_machine
from retrain_assets.models.deployed_model_asset import deployed_model
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.models.registered_model_asset import registered_model
from retrain_assets.models.resources import GpuServiceResource, training_services
from retrain_assets.store.resource import ProjectDatabase

TICK_BUDGET_SECONDS = 40.0  # Dagster cancels a sensor evaluation after 60 s


def poll_interval_seconds() -> int:
    """Return the tick interval: one poll visit per tick, so interval x 100 bounds the wait."""
    return int(os.environ.get("RETRAIN_POLL_INTERVAL_SECONDS", "180"))


def candidate_request(customer: str, run_key: str, auto_deploy: bool = False) -> dg.RunRequest:
    """Return the run that fetches a finished job's candidate, gates it and registers a pass.

    The selection's checks come with it: the blocking `beats_champion` runs between the
    candidate and `registered_model`, so a failing gate stops the registration in this run.
    With `auto_deploy`, `deployed_model` follows behind its blocking deploy-time check.
    """
    return dg.RunRequest(
        run_key=f"candidate-{run_key}",
        **registration_selection(auto_deploy),
        partition_key=customer,
        run_config={"ops": {"model_candidate": {"config": {"run_key": run_key}}}},
        tags={"customer": customer, "retrain/run_key": run_key},
    )


@dg.sensor(
    minimum_interval_seconds=poll_interval_seconds(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    asset_selection=[model_candidate, registered_model, deployed_model],
    description="Polls the GPU service for every customer in POLL_JOB; one batched call a tick.",
)
def gpu_job_poller(
    context: dg.SensorEvaluationContext,
    project_db: ProjectDatabase,
    gpu_service: GpuServiceResource,
) -> dg.SensorResult:
    """Advance waiting training machines; request candidates for finished jobs."""
    started = time.monotonic()
    db_url, gpu = project_db.connection_url(), gpu_service.client()
    waiting = pointers_in_state(db_url, NAME, "POLL_JOB")
    if not waiting:
        return dg.SensorResult(skip_reason="no customer is waiting on a GPU job")
    jobs = gpu.statuses([str(p.payload[JOB_ID]) for p in waiting])
    machine, services = training_machine(), training_services(db_url, gpu)
    requests, still_running = [], []
    auto = auto_deploy_ready(db_url)  # auto_deploy on and no rollout in progress
    for pointer in waiting:
        job = jobs.get(str(pointer.payload[JOB_ID]))
        if job is not None and job.status is JobStatus.SUCCEEDED:
            requests.append(
                candidate_request(pointer.customer, pointer.run_key, pointer.customer in auto)
            )
        else:
            still_running.append(pointer.customer)
    # Chunks not started inside the budget stay untouched: nobody loses a poll visit.
    results = advance_many(
        db_url, machine, still_running, services, known=jobs,
        deadline=started + TICK_BUDGET_SECONDS,
    )
    advanced = sum(not r.busy and r.error is None for r in results.values())
    deferred = len(still_running) - len(results)
    for customer, result in results.items():
        if result.error is not None:
            context.log.error(f"{customer}: the machine could not advance: {result.error}")
        elif result.pointer is not None and result.pointer.state == machine.failed:
            context.log.warning(
                f"{customer} run {result.pointer.run_key} FAILED: {result.pointer.reason}"
            )
    context.log.info(
        f"{len(waiting)} waiting, {len(jobs)} statuses in one batch, {len(requests)} finished, "
        f"{advanced} advanced, {deferred} deferred to the next tick"
    )
    return dg.SensorResult(run_requests=requests)
