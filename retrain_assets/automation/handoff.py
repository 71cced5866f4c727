"""The sensor's side of the hand-off: the facts of every waiting customer, and its run requests.

Per tick, for all customers in a hand-off state at once: one runs query by the `retrain/run_key`
tag (the candidate runs requested for those run keys, any attempt), one `gate_results` query
(the latest `beats_champion` verdict of each run key), and, for the run keys whose verdict is a
pass, two event-log queries (the latest `registered_model` materialization of each of those
customers). The error of a failed run is read for at most `FAILURES_READ` runs a tick (two
event queries each); the others are named by their run id. The machine decides from those
facts (`machines/handoff.py`); this module then turns every hand-off state whose attempt has
no run yet into a `RunRequest` keyed `candidate-<run key>-<attempt>` (built by the sensor's
`candidate_request`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import dagster as dg

from retrain_assets.asset_keys import REGISTERED_MODEL
from retrain_assets.machines.backoff import retry_pending
from retrain_assets.machines.handoff import (
    ATTEMPT,
    HANDOFF_STATES,
    CandidateRun,
    HandoffFacts,
    RecordedVerdict,
)
from retrain_assets.machines.store import Pointer
from retrain_assets.models.lineage import RUN_KEY, metadata_text
from retrain_assets.store.database import transaction

RUN_KEY_TAG = "retrain/run_key"
ATTEMPT_TAG = "retrain/handoff_attempt"
GATE = "beats_champion"
_FAILURE_TEXT = 600  # characters of a failed run's error kept in the machine's history
FAILURES_READ = 20  # failed runs whose error a tick reads from the event log
UNREAD = "(error not read this tick: see the run)"


def handoff_facts(
    instance: dg.DagsterInstance, db_url: str, pointers: Sequence[Pointer]
) -> dict[tuple[str, str], HandoffFacts]:
    """Return the facts of each pointer's run key, keyed by (customer, run key)."""
    if not pointers:
        return {}
    keys = sorted({p.run_key for p in pointers})
    runs = _candidate_runs(instance, keys)
    verdicts = latest_verdicts(db_url, keys)
    passed = {p.customer for p in pointers if (v := verdicts.get(p.run_key)) and v.passed}
    registered = registered_versions(instance, passed)
    current = {
        (p.customer, p.run_key): [
            run
            for run in runs.get((p.customer, p.run_key), [])
            if _ended_unsuccessful(run, p.payload.get(ATTEMPT))
        ]
        for p in pointers
    }
    to_read = [run.run_id for ended in current.values() for run in ended][:FAILURES_READ]
    errors = {run_id: failure_of(instance, run_id) for run_id in to_read}
    facts: dict[tuple[str, str], HandoffFacts] = {}
    for p in pointers:
        version = registered.get(p.customer, (None, None))
        ended = {run.run_id for run in current[(p.customer, p.run_key)]}
        facts[(p.customer, p.run_key)] = HandoffFacts(
            tuple(
                dataclasses.replace(run, failure=errors.get(run.run_id, UNREAD))
                if run.run_id in ended
                else run
                for run in runs.get((p.customer, p.run_key), [])
            ),
            verdicts.get(p.run_key),
            version[1] if version[0] == p.run_key else None,
        )
    return facts


def _ended_unsuccessful(run: CandidateRun, attempt: object) -> bool:
    """Return True for the current attempt's run that ended without success (its error counts)."""
    return run.finished and run.status != "SUCCESS" and str(run.attempt) == str(attempt)


def registered_versions(
    instance: dg.DagsterInstance, customers: set[str]
) -> dict[str, tuple[str | None, str | None]]:
    """Return customer -> (run key, version) of its latest `registered_model` materialization.

    Two queries for all customers: the latest storage id per partition, then those records.
    """
    if not customers:
        return {}
    latest = instance.get_latest_storage_id_by_partition(
        REGISTERED_MODEL, dg.DagsterEventType.ASSET_MATERIALIZATION, set(customers)
    )
    if not latest:
        return {}
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=REGISTERED_MODEL, storage_ids=list(latest.values())),
        limit=len(latest),
    ).records
    found: dict[str, tuple[str | None, str | None]] = {}
    for record in records:
        event = record.asset_materialization
        if event is None or event.partition is None:
            continue
        found[event.partition] = (
            metadata_text(event.metadata.get(RUN_KEY)),
            metadata_text(event.metadata.get("version")),
        )
    return found


def _candidate_runs(
    instance: dg.DagsterInstance, keys: list[str]
) -> dict[tuple[str, str], list[CandidateRun]]:
    """Return the requested candidate runs of these run keys, per (customer, run key)."""
    found: dict[tuple[str, str], list[CandidateRun]] = {}
    for run in instance.get_runs(filters=dg.RunsFilter(tags={RUN_KEY_TAG: keys})):
        attempt = run.tags.get(ATTEMPT_TAG, "")
        if not attempt.isdigit():  # a run launched by hand: no attempt of the hand-off
            continue
        key = (run.tags.get("customer", ""), run.tags[RUN_KEY_TAG])
        found.setdefault(key, []).append(
            CandidateRun(int(attempt), run.run_id, run.status.value, run.is_finished)
        )
    return found  # newest first, as get_runs returns them


def failure_of(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """Return the first line of a failed run's first step failure (or run failure), if any.

    The line is the asset's own error, not Dagster's wrapper around it ("Error occurred while
    executing op ..."): the step's errors name what was being done (`models/handoff_errors`).
    """
    for kind in (dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE):
        records = instance.get_records_for_run(run_id, of_type=kind, limit=1).records
        for record in records:
            event = record.event_log_entry.dagster_event
            data = getattr(event, "event_specific_data", None) if event else None
            error = _unwrapped(getattr(data, "error", None))
            text = error.message if error is not None else (event.message if event else None)
            if text:
                return _short_class(text.strip().splitlines()[0], error)[:_FAILURE_TEXT]
    return None


_WRAPPERS = frozenset({"DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError"})


def _unwrapped(error: Any) -> Any:
    """Return the user code's error inside Dagster's step-execution wrapper, if wrapped."""
    while error is not None and error.cls_name in _WRAPPERS and error.cause is not None:
        error = error.cause
    return error


def _short_class(line: str, error: Any) -> str:
    """Drop the module path before the error's class name ('a.b.Error: x' -> 'Error: x')."""
    name = getattr(error, "cls_name", None)
    head, sep, rest = line.partition(": ")
    if name and sep and head.endswith(f".{name}"):
        return f"{name}: {rest}"
    return line


def latest_verdicts(db_url: str, run_keys: Iterable[str]) -> dict[str, RecordedVerdict]:
    """Return the latest `beats_champion` verdict of each run key that has one."""
    with transaction(db_url) as cur:
        cur.execute(
            "SELECT DISTINCT ON (run_key) run_key, passed, reason FROM gate_results"
            " WHERE run_key = ANY(%s) AND gate = %s ORDER BY run_key, id DESC",
            (list(run_keys), GATE),
        )
        return {key: RecordedVerdict(passed, reason) for key, passed, reason in cur.fetchall()}


RequestBuilder = Callable[[str, str, int], dg.RunRequest]  # (customer, run key, attempt)


def handoff_requests(
    pointers: Iterable[Pointer],
    facts: Mapping[tuple[str, str], HandoffFacts],
    build: RequestBuilder,
) -> list[dg.RunRequest]:
    """Return a request for each hand-off whose current attempt has no run in the instance.

    A tick evaluated twice asks again for the same attempt (same Dagster run key: Dagster
    launches it once); a new attempt is only ever chosen by the machine, after a run ended, and
    is requested once its retry's wait is over.
    """
    requests = []
    now = dt.datetime.now(dt.UTC)
    for p in pointers:
        attempt = p.payload.get(ATTEMPT)
        if p.state not in HANDOFF_STATES or p.terminal or attempt is None:
            continue
        if retry_pending(p.payload, p.state, now):
            continue
        known = facts.get((p.customer, p.run_key))
        if known is not None and known.run_of(int(attempt)) is not None:
            continue
        requests.append(build(p.customer, p.run_key, int(attempt)))
    return requests
