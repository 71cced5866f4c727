"""The training machine: exactly one trained, gated candidate per run key, from the GPU service.

    INITIAL -> CHECK_LAST_TRAIN -> SUBMIT_JOB -> POLL_JOB (yields) -> AWAIT_CANDIDATE (yields)
            -> DOWNLOAD_SAVE -> AWAIT_GATE (yields) -> DONE
    JOB_FAILED -> SUBMIT_JOB; CHECK_LAST_TRAIN -> AWAIT_GATE | AWAIT_CANDIDATE | POLL_JOB

The run key is the GPU job's idempotency key, so every resubmission, attach and resume lands
on the same remote job. A remote success whose download failed costs a download, never a
retrain: DOWNLOAD_SAVE retries itself, and CHECK_LAST_TRAIN sends a restarted run whose job
succeeded to AWAIT_CANDIDATE. Every path to a saved candidate goes through AWAIT_GATE, so a
run is DONE only once its candidate was gated (and registered on a pass); see `handoff`.

Retries wait (`backoff`): a failed download, a resubmission and a candidate run requested again
are each visited by a later advance once their wait is over, never in the same one. A service
that cannot be reached while a job runs is recorded once, not polled to death (`outage`).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from retrain_assets.gpu.protocol import Artifact, GpuService, Job, JobStatus
from retrain_assets.machines import runs, store
from retrain_assets.machines.backoff import Backoff
from retrain_assets.machines.handoff import (
    ATTEMPTS_SPENT,
    AWAIT_CANDIDATE,
    AWAIT_GATE,
    GATE_FAILED,
    HandoffView,
    await_candidate,
    await_gate,
)
from retrain_assets.machines.outage import (
    STATUS_FAILED,
    UNREACHABLE_SINCE,
    ServiceDown,
    StatusUnread,
    classify,
    fmt,
    outage_limit_seconds,
    unreachable_since,
)
from retrain_assets.machines.step import Context, Step
from retrain_assets.machines.table import DONE, FAILED, Machine, State

NAME = "training"
INITIAL = "INITIAL"
CHECK_LAST_TRAIN = "CHECK_LAST_TRAIN"
SUBMIT_JOB = "SUBMIT_JOB"
POLL_JOB = "POLL_JOB"
JOB_FAILED = "JOB_FAILED"
DOWNLOAD_SAVE = "DOWNLOAD_SAVE"
SPEC = "spec"
JOB_ID = "job_id"
EVIDENCE = "evidence"  # payload: the window's evidence as `training_job` judged it
SERVICE_LOST = "service lost"  # branch label: unreachable for longer than the outage limit


class CandidateStore(Protocol):
    """Where finished candidates live, keyed by customer and run key."""

    def has_candidate(self, customer: str, run_key: str) -> bool:
        """Return True when this run key's candidate is already saved."""
        ...

    def save_candidate(self, customer: str, run_key: str, artifact: Artifact) -> None:
        """Keep a downloaded, verified artifact as this run key's candidate."""
        ...


@dataclass(frozen=True)
class TrainingServices:
    """What the training transitions talk to; injected so tests and replicas choose them.

    `handoff` is the sensor's batch of hand-off facts (None inside a Dagster run: the hand-off
    states then wait for the sensor); `fetching` is True only in the candidate run, the one
    place that moves AWAIT_CANDIDATE on to the download.
    """

    gpu: GpuService
    candidates: CandidateStore
    download_dir: Callable[[str], Path]
    handoff: HandoffView | None = None
    fetching: bool = False


Ctx = Context[TrainingServices]


def check_spec(ctx: Ctx) -> Step:
    """Refuse a run without a job spec, or whose window cannot be judged, before any GPU job.

    The window's evidence (`features/evidence.py`) is judged by whoever starts the run (it reads
    the customer's rows) and recorded in the payload; a window without enough of the customer's
    rows ends here, FAILED with the numbers: no job is submitted, nothing is trained.
    """
    if not isinstance(ctx.payload.get(SPEC), Mapping):
        return Step.failure(f"run {ctx.run_key} was started without a job spec in its payload")
    evidence = ctx.payload.get(EVIDENCE)
    if isinstance(evidence, Mapping) and evidence.get("enough") is False:
        return Step.failure(f"window refused before any GPU job: {evidence.get('reason')}")
    if isinstance(evidence, Mapping):
        return Step.success(f"window {evidence.get('window')} judged: {evidence.get('reason')}")
    return Step.success()


def check_last_train(ctx: Ctx) -> Step:
    """Reuse whatever already exists for this run key before paying for a new job."""
    if ctx.services.candidates.has_candidate(ctx.customer, ctx.run_key):
        return Step.success("candidate already saved", branch="candidate saved")
    job = ctx.services.gpu.find(ctx.run_key)
    if job is None:
        return Step.success("no remote job for this key")
    attached = {JOB_ID: job.id}
    if job.status is JobStatus.SUCCEEDED:
        return Step.success(f"job {job.id} succeeded", branch="remote succeeded", payload=attached)
    if not job.status.finished:
        note = f"attached to {job.status} job {job.id}"
        return Step.success(note, branch="remote running", payload=attached)
    return Step.success(f"job {job.id} {job.status}: resubmit resumes it", payload=attached)


def submit_job(ctx: Ctx) -> Step:
    """Submit (or resume) the job for this key; the service dedupes on the key."""
    job = ctx.services.gpu.submit(ctx.run_key, dict(ctx.payload[SPEC]))
    note = f"job {job.id} attempt {job.attempt} {job.status}"
    return Step.success(note, payload={JOB_ID: job.id})


def wait_note(job: Job) -> str | None:
    """Return the note of a poll that waits on this job; None once its attempt has ended.

    One function for the transition and for `known_poll_wait`, so the visit the engine records
    without running the transition says exactly what the transition would have said. A job
    that needs a person (`Job.attention`) is no plain wait: `_poll_step` names it as an error.
    """
    if job.status.finished or job.attention:
        return None
    note = f"{job.status} {job.rounds_done}/{job.total_rounds} rounds"
    return f"{note} ({job.detail})" if job.detail else note


def poll_job(ctx: Ctx, *, outage_limit: float = 86400.0) -> Step:
    """Check the job, from the caller's batched statuses when given; yield while it runs.

    A status call that failed (the caller's batch, or this call) is judged by `classify`: a
    service that cannot be reached is an outage, recorded on its first poll and ended past
    `outage_limit` seconds (`_service_down`); any other failure (an error answer, an answer
    that does not parse, a client bug) is a failed poll with its text, spending the visit.
    The first poll that reaches the service again says so and clears the outage.
    """
    job_id = ctx.payload[JOB_ID]
    failed = ctx.prefetched.get(STATUS_FAILED)
    job = ctx.prefetched.get(job_id)
    if not isinstance(failed, ServiceDown | StatusUnread) and not isinstance(job, Job):
        try:
            job = ctx.services.gpu.get(job_id)
        except Exception as err:
            failed = classify(err, dt.datetime.now(dt.UTC))
    if isinstance(failed, ServiceDown):
        return _service_down(ctx, failed, outage_limit)
    back = _back_after_outage(ctx.payload)
    if isinstance(failed, StatusUnread):
        step = _status_unread(job_id, failed)
    else:
        assert isinstance(job, Job)
        step = _poll_step(job)
    if back is None:
        return step
    note = f"{back}; {step.error or step.note}"
    return Step(
        ok=step.ok,
        yielded=step.yielded,
        branch=step.branch,
        payload={**step.payload, UNREACHABLE_SINCE: None},
        note=note,
        error=step.error,
        clear_error=step.ok,
    )


def _status_unread(job_id: object, failed: StatusUnread) -> Step:
    """Fail the poll with what the status call got: an answer, not an outage."""
    return Step.failure(f"status of job {job_id} not read (not an outage): {failed.error}")


def _poll_step(job: Job) -> Step:
    if job.attention and not job.status.finished:
        # a failed visit: the history row and `last_error` name the hold at once; the poll
        # stays in POLL_JOB, so a person's release lets the run go on within the budget
        return Step.failure(f"job {job.id} {job.status} but stuck: {job.attention}")
    note = wait_note(job)
    if note is not None:
        return Step.wait(note)
    if job.status is JobStatus.SUCCEEDED:
        return Step.success(f"job {job.id} succeeded")
    error = f"remote job {job.id} {job.status} (attempt {job.attempt}): {job.error}"
    return Step.failure(error, branch="remote failed", payload={"remote_error": error})


def _service_down(ctx: Ctx, down: ServiceDown, limit: float) -> Step:
    """Record an outage's first poll (a failed visit: history row and `last_error`); end it late.

    Only the first poll and a visit past the limit are meant to get here (the sensor leaves a
    run alone for the rest of an outage); any other visit waits and keeps the error.
    """
    since = unreachable_since(ctx.payload)
    if since is None:
        error = f"training service unreachable since {fmt(down.at)}: {down.error}"
        return Step.failure(error, payload={UNREACHABLE_SINCE: down.at.isoformat()})
    lasted = (down.at - since).total_seconds()
    if lasted > limit:
        error = (
            f"training service unreachable since {fmt(since)} ({lasted:.0f} s, over the outage "
            f"limit of {limit:.0f} s): {down.error}; job {ctx.payload.get(JOB_ID)} may still "
            "run: `retrain-assets retry` attaches to it"
        )
        return Step.failure(error, branch=SERVICE_LOST)
    return Step.wait(f"training service still unreachable since {fmt(since)} ({lasted:.0f} s)")


def _back_after_outage(payload: Mapping[str, Any]) -> str | None:
    since = unreachable_since(payload)
    if since is None:
        return None
    lasted = (dt.datetime.now(dt.UTC) - since).total_seconds()
    return f"training service reachable again (unreachable since {fmt(since)}, {lasted:.0f} s)"


def known_poll_wait(payload: Mapping[str, Any], prefetched: Mapping[str, Any]) -> str | None:
    """Return the note of a poll the batched statuses decide will wait (POLL_JOB's known_wait).

    `poll_job`'s first branch, with no service call: a job the batch left out (or one whose
    attempt ended) returns None, and so does a run coming back from an outage (its visit
    records the recovery), and the transition runs as usual.
    """
    if unreachable_since(payload) is not None:
        return None
    job = prefetched.get(payload[JOB_ID]) if JOB_ID in payload else None
    return wait_note(job) if isinstance(job, Job) else None


def job_failed(ctx: Ctx) -> Step:
    """Route a failed attempt back to submission; SUBMIT_JOB's budget decides when to stop."""
    return Step.success(f"resubmitting after: {ctx.payload.get('remote_error')}")


def download_save(ctx: Ctx) -> Step:
    """Download and verify the artifact, then keep it as this key's candidate."""
    job_id = ctx.payload[JOB_ID]
    artifact = ctx.services.gpu.download(job_id, ctx.services.download_dir(ctx.run_key))
    ctx.services.candidates.save_candidate(ctx.customer, ctx.run_key, artifact)
    return Step.success(f"candidate saved from job {job_id}", payload={"sha256": artifact.sha256})


def training_machine(
    *,
    submit_budget: int = 3,
    poll_budget: int = 100,
    download_budget: int = 5,
    handoff_budget: int = 100,
    handoff_attempts: int = 3,
    retry_backoff: Backoff | None = None,
    outage_limit: float | None = None,
) -> Machine:
    """Return the training machine with its visit budgets and waits.

    Args:
        submit_budget: submissions per run (first one plus retries after failures).
        poll_budget: polls per run; one per sensor tick, so it bounds the wait.
        download_budget: download attempts per run before the run fails.
        handoff_budget: visits of each hand-off state (one per sensor tick): bounds the wait
            for the candidate run, its gate and its registration.
        handoff_attempts: candidate runs requested per run before it ends FAILED.
        retry_backoff: the wait before each retry of SUBMIT_JOB, DOWNLOAD_SAVE and a candidate
            run (default: `Backoff.from_settings()`, the RETRAIN_RETRY_FIRST_SECONDS family).
        outage_limit: seconds a run waits on an unreachable service before it ends FAILED
            (default: RETRAIN_GPU_OUTAGE_LIMIT_SECONDS).
    """
    backoff = retry_backoff if retry_backoff is not None else Backoff.from_settings()
    limit = outage_limit if outage_limit is not None else outage_limit_seconds()
    waits_for_candidate = functools.partial(
        await_candidate, attempts=handoff_attempts, backoff=backoff
    )
    waits_for_gate = functools.partial(await_gate, attempts=handoff_attempts, backoff=backoff)
    return Machine(
        name=NAME,
        initial=INITIAL,
        terminal=frozenset({DONE, FAILED}),
        states={
            INITIAL: State(check_spec, CHECK_LAST_TRAIN, FAILED),
            CHECK_LAST_TRAIN: State(
                check_last_train,
                SUBMIT_JOB,
                SUBMIT_JOB,
                branches={
                    "candidate saved": AWAIT_GATE,
                    "remote succeeded": AWAIT_CANDIDATE,
                    "remote running": POLL_JOB,
                },
            ),
            SUBMIT_JOB: State(
                submit_job, POLL_JOB, JOB_FAILED, max_visits=submit_budget, backoff=backoff
            ),
            POLL_JOB: State(
                functools.partial(poll_job, outage_limit=limit),
                AWAIT_CANDIDATE,
                POLL_JOB,
                may_yield=True,
                max_visits=poll_budget,
                branches={"remote failed": JOB_FAILED, SERVICE_LOST: FAILED},
                known_wait=known_poll_wait,
            ),
            JOB_FAILED: State(job_failed, SUBMIT_JOB, FAILED),
            AWAIT_CANDIDATE: State(
                waits_for_candidate,
                DOWNLOAD_SAVE,
                AWAIT_CANDIDATE,
                may_yield=True,
                max_visits=handoff_budget,
                branches={ATTEMPTS_SPENT: FAILED},
            ),
            DOWNLOAD_SAVE: State(
                download_save,
                AWAIT_GATE,
                DOWNLOAD_SAVE,
                max_visits=download_budget,
                backoff=backoff,
            ),
            AWAIT_GATE: State(
                waits_for_gate,
                DONE,
                AWAIT_GATE,
                may_yield=True,
                max_visits=handoff_budget,
                branches={GATE_FAILED: DONE, ATTEMPTS_SPENT: FAILED},
            ),
        },
    )


def start_training(
    url: str,
    customer: str,
    run_key: str,
    spec: Mapping[str, Any],
    *,
    machine: Machine | None = None,
    retry: bool = False,
    evidence: Mapping[str, Any] | None = None,
) -> store.Pointer:
    """Start (or find) the customer's training run for this key, keeping the job spec in it.

    `evidence`: the window's evidence (`Evidence.as_metadata()`); INITIAL refuses the run when
    it says the window cannot be judged.
    """
    chosen = machine or training_machine()
    payload: dict[str, Any] = {SPEC: dict(spec)}
    if evidence is not None:
        payload[EVIDENCE] = dict(evidence)
    return runs.start_run(url, chosen, customer, run_key, payload, retry=retry)
