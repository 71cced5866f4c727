"""`retrain-assets reset` and `retrain-assets retry`: an operator repairs a stuck customer.

Both move the customer's training machine by hand through `machines.repoint`, so the move is a
row of `machine_history` naming who did it and why, and both refuse while a Dagster run for
the customer is queued or in progress (it could move the same pointer a moment later). The
machine's sensor (`gpu_job_poller`) advances the moved pointer on its next tick.

- reset CUSTOMER --to STATE --reason TEXT: any state of the training machine's table.
- retry CUSTOMER: a run that ended FAILED goes back to INITIAL, whose CHECK_LAST_TRAIN
  re-enters where it can: a saved candidate goes to its gate, a succeeded GPU job is
  downloaded (not retrained), a running one is polled, a failed one resubmitted (the service
  resumes it from its last checkpoint).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping
from dataclasses import dataclass

import dagster as dg

from retrain_assets.machines.handoff import ATTEMPT, TRIES
from retrain_assets.machines.repoint import check_state, repoint
from retrain_assets.machines.store import Pointer, pointer
from retrain_assets.machines.training import EVIDENCE, JOB_ID, NAME, training_machine
from retrain_assets.models.candidates import CandidateTable
from retrain_assets.policy.busy import PARTITION_TAG, UNFINISHED
from retrain_assets.runtime.environment import child_environment, prepare_dagster_home, repo_file
from retrain_assets.settings import storage_root
from retrain_assets.store.migrations import migrate
from retrain_assets.store.server import ensure_database, start_server

CUSTOMER_TAG = "customer"
HANDOFF_KEYS = (ATTEMPT, TRIES)  # a repaired run counts its hand-off attempts afresh


class OperatorRefused(ValueError):
    """The repair cannot be done now or as asked; the message says why."""


@dataclass(frozen=True)
class Repaired:
    """What an operator's command did, and what happens next."""

    before: Pointer
    after: Pointer
    next_step: str


def operator_name(given: str | None) -> str:
    """Return who acts: `--by` when given, else the operating-system user."""
    return given or getpass.getuser()


def runs_in_progress(instance: dg.DagsterInstance, customer: str) -> list[str]:
    """Return the ids of the customer's queued or running Dagster runs (partition or tag)."""
    found: dict[str, None] = {}
    for tag in (PARTITION_TAG, CUSTOMER_TAG):
        runs = instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED, tags={tag: customer}))
        found.update({run.run_id: None for run in runs})
    return list(found)


def _current(url: str, instance: dg.DagsterInstance, customer: str) -> Pointer:
    found = pointer(url, NAME, customer)
    if found is None:
        raise OperatorRefused(f"{customer} has no training run to repair")
    running = runs_in_progress(instance, customer)
    if running:
        raise OperatorRefused(
            f"{customer} has Dagster run(s) in progress ({', '.join(running)}): wait for them "
            "to finish (or cancel them) before moving its training machine"
        )
    return found


def reset_training(
    url: str, instance: dg.DagsterInstance, customer: str, target: str, reason: str, by: str
) -> Repaired:
    """Move the customer's training machine to `target`, a state of its table.

    Raises:
        OperatorRefused: no reason, an unknown state, no training run, or a run in progress.
    """
    if not reason.strip():
        raise OperatorRefused("reset needs --reason: the history records why")
    machine = training_machine()
    check_state(machine, target)
    before = _current(url, instance, customer)
    note = f"reset by {by} from {before.state} to {target}: {reason}"
    after = repoint(url, machine, customer, target, note, drop=HANDOFF_KEYS)
    nxt = (
        f"the run {after.run_key} has ended in {target}"
        if after.terminal
        else f"the next gpu_job_poller tick advances run {after.run_key} from {target}"
    )
    return Repaired(before, after, nxt)


def retry_training(
    url: str, instance: dg.DagsterInstance, customer: str, by: str, reason: str | None = None
) -> Repaired:
    """Re-enter the customer's FAILED training run where it can (from INITIAL).

    Raises:
        OperatorRefused: no training run, a run that is not FAILED, a run refused for its
            window (retried, it is refused again), or a run in progress.
    """
    machine = training_machine()
    before = _current(url, instance, customer)
    if before.state != machine.failed:
        raise OperatorRefused(
            f"{customer}'s training run {before.run_key} is in {before.state}, not "
            f"{machine.failed}: retry re-enters failed runs only (reset moves any run)"
        )
    judged = before.payload.get(EVIDENCE)
    if isinstance(judged, Mapping) and judged.get("enough") is False:
        raise OperatorRefused(
            f"{customer}'s training run {before.run_key} was refused before any GPU job, its "
            f"window {judged.get('window')} cannot be judged: a retry would refuse it again; "
            "launch training_job for a window that can be judged (the refusal names the "
            f"latest): {before.reason}"
        )
    why = f": {reason}" if reason else ""
    note = f"retry by {by}{why} (it had failed: {before.reason})"
    after = repoint(url, machine, customer, machine.initial, note, drop=HANDOFF_KEYS)
    return Repaired(before, after, _where_it_re_enters(url, after))


def _where_it_re_enters(url: str, p: Pointer) -> str:
    """Say what the next tick's CHECK_LAST_TRAIN will find, as far as the project knows."""
    if CandidateTable(url, storage_root()).get(p.run_key) is not None:
        return "its candidate is saved: the next gpu_job_poller tick sends it to the gate"
    job = p.payload.get(JOB_ID)
    if job:
        return (
            f"the next gpu_job_poller tick looks at GPU job {job}: a succeeded job is "
            "downloaded (not retrained), a running one polled, a failed one resubmitted "
            "(resumed from its last checkpoint)"
        )
    return "the next gpu_job_poller tick submits its GPU job"


def attach_platform() -> tuple[str, dg.DagsterInstance]:
    """Return the project database URL and the platform's Dagster instance, as `up` sets them.

    The instance is the caller's to close (use it as a context manager).
    """
    server = start_server()
    ensure_database(server, "dagster")
    app_url = ensure_database(server, "app")
    migrate(app_url)
    os.environ.update(child_environment(server, prepare_dagster_home(repo_file("dagster.yaml"))))
    return app_url, dg.DagsterInstance.get()
