"""The training machine's hand-off: after the GPU job, one Dagster run fetches, gates, registers.

A finished job is not the end of a training run: its candidate must be downloaded, gated and,
on a pass, registered, and that happens in a Dagster run the machine's sensor requests. The
customer's pointer says what it waits for:

    AWAIT_CANDIDATE  the candidate run, which downloads the model (DOWNLOAD_SAVE)
    AWAIT_GATE       the gate's verdict and, on a pass, the registration

Both yield and are visited once per sensor tick (the visit budget bounds the wait). The run is
requested with the Dagster run key `candidate-<run key>-<attempt>`; the attempt number is one
more than any attempt the Dagster instance has seen for that run key, so a key is never
reused (Dagster drops a request whose run key its sensor already used). A requested run that
failed or was cancelled before the hand-off was recorded is requested again with the next
attempt, once the retry's wait (`backoff`) is over; past the attempt budget the run ends FAILED,
naming the last run and its error.

The transitions decide from facts (`HandoffFacts`) the sensor fetched before the advance (one
runs query by tag, one verdict query): they never launch anything themselves, so the facts
stay true for the whole advance and reach every visit through the services, not `prefetched`.
Without facts (an advance inside a Dagster run) a hand-off state just waits for the sensor.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from retrain_assets.machines.backoff import RETRY_AT, Backoff, retry_marker
from retrain_assets.machines.step import Context, Step

AWAIT_CANDIDATE = "AWAIT_CANDIDATE"
AWAIT_GATE = "AWAIT_GATE"
HANDOFF_STATES = frozenset({AWAIT_CANDIDATE, AWAIT_GATE})
ATTEMPT = "handoff_attempt"  # payload: the attempt whose candidate run the machine waits for
TRIES = "handoff_tries"  # payload: attempts requested since the run entered the hand-off
GATE_FAILED = "gate failed"  # branch label: the verdict is a fail, the hand-off is complete
ATTEMPTS_SPENT = "attempts spent"  # branch label: the attempt budget is used up


def request_key(run_key: str, attempt: int) -> str:
    """Return the Dagster run key of one attempt to hand a run key's candidate over."""
    return f"candidate-{run_key}-{attempt}"


@dataclass(frozen=True)
class CandidateRun:
    """One requested candidate run, as the Dagster instance knows it."""

    attempt: int
    run_id: str
    status: str  # DagsterRunStatus name
    finished: bool
    failure: str | None = None  # the first step failure of a run that did not succeed


@dataclass(frozen=True)
class RecordedVerdict:
    """The latest verdict of the gate for a run key, from `gate_results`."""

    passed: bool
    reason: str


@dataclass(frozen=True)
class HandoffFacts:
    """What the sensor knows about one run key's hand-off before it advances the machine."""

    runs: tuple[CandidateRun, ...] = ()  # requested candidate runs of the run key, newest first
    verdict: RecordedVerdict | None = None
    registered_version: str | None = None  # the registry version, once registered_model ran

    def run_of(self, attempt: int) -> CandidateRun | None:
        """Return the newest run of an attempt (a re-execution shares its tags), if any."""
        return next((run for run in self.runs if run.attempt == attempt), None)

    @property
    def next_attempt(self) -> int:
        """Return an attempt number no run of this run key has used."""
        return max((run.attempt for run in self.runs), default=0) + 1


class HandoffView(Protocol):
    """The facts of the customers a sensor tick is about to advance."""

    def facts(self, customer: str, run_key: str) -> HandoffFacts | None:
        """Return the facts of a customer's run key, None when this tick has none."""
        ...


class FactsByCustomer:
    """A `HandoffView` over facts fetched in a batch, keyed by customer and run key."""

    def __init__(self, facts: Mapping[tuple[str, str], HandoffFacts]) -> None:
        """Keep the batch."""
        self._facts = dict(facts)

    def facts(self, customer: str, run_key: str) -> HandoffFacts | None:
        """Return the facts fetched for this customer's run key, if any."""
        return self._facts.get((customer, run_key))


def _facts(ctx: Context[Any]) -> HandoffFacts | None:
    view = getattr(ctx.services, "handoff", None)
    return view.facts(ctx.customer, ctx.run_key) if view is not None else None


def await_candidate(ctx: Context[Any], *, attempts: int, backoff: Backoff | None = None) -> Step:
    """Let the candidate run download the model; elsewhere, wait for (or re-request) that run."""
    if getattr(ctx.services, "fetching", False):
        return Step.success("the candidate run fetches the model")
    return _wait(ctx, attempts, "the candidate run", backoff)


def await_gate(ctx: Context[Any], *, attempts: int, backoff: Backoff | None = None) -> Step:
    """End the run once the verdict (and on a pass, the registration) is recorded."""
    facts = _facts(ctx)
    verdict = facts.verdict if facts is not None else None
    if verdict is not None and not verdict.passed:
        reason = f"gate failed, nothing registered: {verdict.reason}"
        return Step.success(reason, branch=GATE_FAILED)
    if verdict is not None and facts is not None and facts.registered_version is not None:
        return Step.success(
            f"registered as version {facts.registered_version}; gate passed: {verdict.reason}"
        )
    what = "the registration" if verdict is not None else "the gate and the registration"
    return _wait(ctx, attempts, what, backoff)


def _wait(ctx: Context[Any], attempts: int, what: str, backoff: Backoff | None = None) -> Step:
    """Wait for the current attempt's run; request the next attempt when it ended unfinished.

    With a `backoff`, the next attempt is requested once its wait is over: the payload says
    when (`RETRY_AT`), the engine does not visit the state before then and the sensor does not
    request the run.
    """
    facts = _facts(ctx)
    attempt = ctx.payload.get(ATTEMPT)
    if facts is None:
        asked = f" ({request_key(ctx.run_key, int(attempt))})" if attempt else ""
        return Step.wait(f"waiting for {what}{asked}; the sensor requests and follows it")
    tries = int(ctx.payload.get(TRIES, 0))
    if attempt is None:
        first = facts.next_attempt
        return Step.wait(
            f"requesting {request_key(ctx.run_key, first)} for {what}",
            payload={ATTEMPT: first, TRIES: tries + 1},
        )
    key = request_key(ctx.run_key, int(attempt))
    run = facts.run_of(int(attempt))
    if run is None:
        return Step.wait(f"waiting for {what}: {key} requested, not launched yet")
    if not run.finished:
        return Step.wait(f"waiting for {what}: {key} is run {run.run_id} ({run.status})")
    ended = f"{key} (run {run.run_id}) ended {run.status} before {what} was recorded"
    if run.failure:
        ended += f": {run.failure}"
    if tries >= attempts:
        return Step.failure(
            f"hand-off budget spent: {tries} of {attempts} candidate run(s) requested, none "
            f"completed; last: {ended}",
            branch=ATTEMPTS_SPENT,
        )
    following = facts.next_attempt
    payload: dict[str, Any] = {ATTEMPT: following, TRIES: tries + 1}
    if backoff is None:
        return Step.wait(
            f"{ended}; requesting {request_key(ctx.run_key, following)}", payload=payload
        )
    now = dt.datetime.now(dt.UTC)
    at = now + dt.timedelta(seconds=backoff.delay(max(tries, 1)))
    payload[RETRY_AT] = retry_marker(ctx.state, at)
    return Step.wait(
        f"{ended}; {request_key(ctx.run_key, following)} (attempt {tries + 1} of {attempts}) "
        f"to be requested at {at:%Y-%m-%d %H:%M:%S} UTC (in {(at - now).total_seconds():.0f} s)",
        payload=payload,
    )
