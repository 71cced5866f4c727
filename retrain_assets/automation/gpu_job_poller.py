"""`gpu_job_poller`: advance every unfinished training machine; polls GPU jobs, drives hand-offs.

Nothing else waits for the GPU: between ticks a waiting customer is one row in Postgres. Each
tick takes every training machine that is not terminal (a run's own freshly started pointer
gets `STRANDED_AFTER_SECONDS` before the sensor adopts it), so no customer can stay in a
non-terminal state without a tick advancing it:

- POLL_JOB: batched status calls, 5,000 polls a slice, each slice's asked while the one
  before is advanced; a poll whose job is still queued or running is one SQL-recorded visit
  (`State.known_wait`), a failed job is resubmitted by the machine within its budget, a
  succeeded one moves on to the hand-off; a batch that fails is judged by
  `machines/outage.classify`: a service that cannot be reached is an outage (recorded once,
  then left alone), any other failure (a 401, a 500 with a body, an answer that does not parse)
  is a failed poll on every machine it concerned, with its text, spending their visits;
- AWAIT_CANDIDATE / AWAIT_GATE: the hand-off (`automation/handoff.py`): the candidate run is
  requested as `candidate-<run key>-<attempt>`, requested again with the next attempt when it
  failed or was cancelled, and the machine ends DONE once the verdict (and on a pass the
  registration) is recorded;
- anything an operator repointed: advanced from there.

Past a budget the machine records FAILED with the reason. The sensor keeps its name from the
days it only polled: its tick history and the run keys it used stay with it.
"""

import contextlib
import datetime as dt
import gc
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

import dagster as dg

from retrain_assets.asset_keys import MODEL_CANDIDATE, TRAINING_JOB, name_of
from retrain_assets.automation.handoff import (
    ATTEMPT_TAG,
    RUN_KEY_TAG,
    handoff_facts,
    handoff_requests,
)
from retrain_assets.automation.intervals import POLL, interval_seconds
from retrain_assets.automation.registration_selection import registration_selection
from retrain_assets.deployment.records import auto_deploy_ready
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.gpu.protocol import Job, JobStatus
from retrain_assets.machines.backoff import retry_pending
from retrain_assets.machines.engine import AdvanceResult, advance_many
from retrain_assets.machines.handoff import HANDOFF_STATES, FactsByCustomer, request_key
from retrain_assets.machines.observations import transition_observations
from retrain_assets.machines.outage import (
    STATUS_FAILED,
    ServiceDown,
    StatusFailure,
    classify,
    needs_outage_visit,
    outage_limit_seconds,
)
from retrain_assets.machines.store import Pointer, unfinished_pointers
from retrain_assets.machines.training import JOB_ID, NAME, POLL_JOB, training_machine
from retrain_assets.models.deployment_decision_asset import deployment_decision
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.models.registered_model_asset import registered_model
from retrain_assets.models.resources import GpuServiceResource, training_services
from retrain_assets.store.resource import ProjectDatabase

TICK_BUDGET_SECONDS = 40.0  # Dagster cancels a sensor evaluation after 60 s
STRANDED_AFTER_SECONDS = 300.0  # a started pointer no run advanced within this is adopted
CHUNK = 500  # customers per transaction of `advance_many`
STATUS_SLICE = 5_000  # polls per slice: its statuses asked while the slice before is advanced


def poll_interval_seconds() -> int:
    """Return the tick interval from ${var} (default 180: interval x 100 bounds the wait).

    Raises:
        SettingsError: the variable (or another setting) is malformed or out of range.
    """
    return interval_seconds(POLL)


def candidate_request(
    customer: str, run_key: str, attempt: int, auto_deploy: bool = False
) -> dg.RunRequest:
    """Return the run that fetches a finished job's candidate, gates it and registers a pass.

    The selection's checks come with it: the blocking `beats_champion` runs between the
    candidate and `registered_model`, so a failing gate stops the registration in this run.
    Its run key names the attempt (`candidate-<run key>-<attempt>`): a failed attempt's key is
    used up in Dagster, so the machine asks for the next attempt, never the same key again.
    With `auto_deploy`, `deployment_decision` follows behind its blocking deploy-time check.
    """
    return dg.RunRequest(
        run_key=request_key(run_key, attempt),
        **registration_selection(auto_deploy),
        partition_key=customer,
        run_config={"ops": {name_of(MODEL_CANDIDATE): {"config": {"run_key": run_key}}}},
        tags={"customer": customer, RUN_KEY_TAG: run_key, ATTEMPT_TAG: str(attempt)},
    )


def due(pointers: list[Pointer], now: dt.datetime) -> list[Pointer]:
    """Return the pointers this tick advances: all but those a run has just started.

    A "ready" pointer was started by a `training_job` run that advances it a moment later; one
    left ready for `STRANDED_AFTER_SECONDS` lost its run (a crash between start and advance).
    A run whose retry is not due yet (`machines/backoff.py`) waits for a later tick.
    """
    stranded = now - dt.timedelta(seconds=STRANDED_AFTER_SECONDS)
    return [
        p
        for p in pointers
        if (p.status != "ready" or p.updated_at <= stranded)
        and not retry_pending(p.payload, p.state, now)
    ]


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector, and resume it only if it was running.

    A tick holds every due pointer, status and result at once (about 2 million objects at
    100,000 customers), all alive until it returns: the collector's passes over them find
    nothing and cost 1.5 - 2 s of such a tick. Reference counting still frees what the tick
    drops; cycles made meanwhile (here or in another thread) wait for the next collection.
    """
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()


def _tick(
    context: dg.SensorEvaluationContext,
    project_db: ProjectDatabase,
    partition_storage: PartitionStorage,
    gpu_service: GpuServiceResource,
) -> dg.SensorResult:
    """Advance unfinished training machines; request the candidate runs their hand-offs need."""
    with _collector_paused():
        return _advance_due(context, project_db, partition_storage, gpu_service)


class _StatusesFailed(Exception):
    """A status batch failed: `failure` says whether as an outage or as a failed call."""

    def __init__(self, failure: StatusFailure) -> None:
        super().__init__(failure.error)
        self.failure = failure


def _statuses_ahead(
    gpu_service: GpuServiceResource, polls: list[Pointer], deadline: float
) -> Iterator[tuple[list[Pointer], dict[str, Job]]]:
    """Yield the polls slice by slice with their statuses, the next slice's asked meanwhile.

    The service answers the next slice while Postgres records this one: two other processes
    on two cores, where asking for all 100,000 first left one of them idle for 4 - 5 s. The
    asking runs in a thread on a client of its own; none is asked past the deadline.

    Raises:
        _StatusesFailed: a batch failed; nothing more is asked.
    """
    client = gpu_service.client()
    # a backend that must not be split says so (Slurm's: each slice above its by-id limit
    # would list every job of the cluster again), and its batch is asked whole, once a tick
    size = int(getattr(client, "STATUS_SLICE", STATUS_SLICE))
    slices = [polls[start : start + size] for start in range(0, len(polls), size)]
    if not slices:
        return

    def ask(part: list[Pointer]) -> dict[str, Job]:
        return client.statuses([str(p.payload[JOB_ID]) for p in part])

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(ask, slices[0])
        for index, part in enumerate(slices):
            try:
                jobs = pending.result()
            except Exception as err:
                raise _StatusesFailed(classify(err, dt.datetime.now(dt.UTC))) from err
            more = index + 1 < len(slices) and time.monotonic() < deadline
            if more:
                pending = pool.submit(ask, slices[index + 1])
            yield part, jobs
            if not more:  # the slices not asked wait for the next tick, never with these jobs
                return


def _advance_due(
    context: dg.SensorEvaluationContext,
    project_db: ProjectDatabase,
    partition_storage: PartitionStorage,
    gpu_service: GpuServiceResource,
) -> dg.SensorResult:
    """Do one tick's work; see `_tick`."""
    deadline = time.monotonic() + TICK_BUDGET_SECONDS
    db_url, gpu = project_db.connection_url(), gpu_service.client()
    pointers = unfinished_pointers(db_url, NAME)
    chosen = due(pointers, dt.datetime.now(dt.UTC))
    if not chosen:
        return dg.SensorResult(skip_reason="no training machine is waiting")
    machine = training_machine()
    results: dict[str, AdvanceResult] = {}

    def advance(part: list[Pointer], facts: FactsByCustomer, jobs: Mapping[str, object]) -> None:
        """Advance these runs; chunks not started by the deadline stay for the next tick.

        A poll whose job the batch shows still queued or running is recorded in SQL from the
        pointer read above (`known`); the rest run their transitions.
        """
        if not part:
            return
        services = training_services(db_url, gpu, partition_storage.root(), handoff=facts)
        customers = [p.customer for p in part]
        known = {p.customer: p for p in part}
        results.update(
            advance_many(
                db_url,
                machine,
                customers,
                services,
                prefetched=jobs,
                chunk=CHUNK,
                deadline=deadline,
                known=known,
            )
        )

    # First the runs that are or may get into the hand-off (all but the polls, the bulk of a
    # tick), with their facts, so a repointed or restarted run asks in this tick.
    others = [p for p in chosen if p.state != POLL_JOB]
    polling = [p for p in chosen if p.state == POLL_JOB]
    facts = handoff_facts(context.instance, db_url, others)
    advance(others, FactsByCustomer(facts), {})
    jobs: dict[str, Job] = {}
    unasked = 0
    problem = None
    try:
        for part, batch in _statuses_ahead(gpu_service, polling, deadline):
            jobs.update(batch)
            succeeded = [p for p in part if _succeeded(batch.get(str(p.payload[JOB_ID])))]
            facts.update(handoff_facts(context.instance, db_url, succeeded))
            advance(part, FactsByCustomer(facts), batch)
    except _StatusesFailed as err:  # polls record the failure; hand-offs still move
        left = [p for p in polling if p.customer not in results]
        told, problem = _status_failed(err.failure, left)
        advance(told, FactsByCustomer(facts), {STATUS_FAILED: err.failure})
        unasked = len(left) - len(told)
        context.log.error(problem)
    final = {p.customer: p for p in pointers}
    for customer, result in results.items():
        if result.error is not None:
            context.log.error(f"{customer}: the machine could not advance: {result.error}")
            continue
        if result.pointer is None:
            continue
        final[customer] = result.pointer
        if result.pointer.state == machine.failed and result.steps:
            context.log.warning(
                f"{customer} run {result.pointer.run_key} FAILED: {result.pointer.reason}"
            )
    auto = auto_deploy_ready(db_url)  # auto_deploy on and no rollout in progress
    requests = handoff_requests(
        final.values(), facts, lambda c, k, a: candidate_request(c, k, a, c in auto)
    )
    advanced = sum(not r.busy and r.error is None for r in results.values())
    progress = {  # words for the observations, which only polls that left POLL_JOB get
        p.customer: f"{job.status} {job.rounds_done}/{job.total_rounds} rounds"
        for p in polling
        if (moved := results.get(p.customer)) is not None
        and moved.pointer is not None
        and moved.pointer.state != POLL_JOB
        and (job := jobs.get(str(p.payload[JOB_ID]))) is not None
    }
    moves = transition_observations(
        TRAINING_JOB, machine, {p.customer: p.state for p in chosen}, results, progress
    )
    summary = (
        f"{len(pointers)} unfinished, {len(chosen)} due, {len(jobs)} statuses, "
        f"{sum(p.state in HANDOFF_STATES for p in chosen)} in the hand-off, "
        f"{len(requests)} candidate run(s) requested, "
        f"{advanced} advanced, {len(chosen) - len(results) - unasked} deferred to the next tick"
    )
    context.log.info(summary)
    # a tick without run requests is "skipped" on the Automation page, its reason in the list
    skipped = None if requests else "; ".join(filter(None, [problem, summary]))
    return dg.SensorResult(run_requests=requests, skip_reason=skipped, asset_events=moves)


def _status_failed(failure: StatusFailure, left: list[Pointer]) -> tuple[list[Pointer], str]:
    """Return the polls a failed status batch visits, and the words for the tick.

    An outage's first tick is a recorded visit of each poll (a history row, `last_error`); the
    rest of it leaves them alone, their budget unspent. Any other failure (an error answer, an
    answer that does not parse, a client bug) visits every poll: each records it with its text
    and spends the visit, as a poll that failed alone does.
    """
    if isinstance(failure, ServiceDown):
        limit = outage_limit_seconds()
        told = [p for p in left if needs_outage_visit(p.payload, failure.at, limit)]
        return told, (
            f"GPU service unreachable, {len(left) - len(told)} poll(s) wait, {len(told)} "
            f"outage(s) recorded on the machine: {failure.error}"
        )
    return left, (
        f"GPU status call failed (not an outage), recorded as a failed poll on {len(left)} "
        f"machine(s): {failure.error}"
    )


def _succeeded(job: Job | None) -> bool:
    return job is not None and job.status is JobStatus.SUCCEEDED


def build_gpu_job_poller(interval_seconds: int = POLL.default) -> dg.SensorDefinition:
    """Return the sensor, ticking every `interval_seconds` (one POLL_JOB visit per tick).

    `definitions.py` passes the interval it read from the variable; the default is for
    code that uses the sensor without the code location (tests, benchmarks).
    """
    return dg.sensor(
        name="gpu_job_poller",
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        asset_selection=[model_candidate, registered_model, deployment_decision],
        description="Advances every unfinished training machine: polls GPU jobs in one batched "
        "call and requests, follows and re-requests each finished job's candidate run.",
    )(_tick)


gpu_job_poller = build_gpu_job_poller()
