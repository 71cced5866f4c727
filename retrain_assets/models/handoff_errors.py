"""Errors of the hand-off that say what was being done, for which run key and snapshot window.

A candidate run that failed on a library's bare `ValueError: Input data must be 2 dimensional
and non empty` left a person to guess which step, which run and which data (issue 31). Each
step of `model_candidate` and `beats_champion` runs inside `doing(...)`: an exception leaves it
as a `HandoffStepError` whose first line names the step, the customer, the run key and the
snapshot window, then the original error; the sensor copies that line into the machine's
history (`automation/handoff.failure_of`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import dagster as dg

from retrain_assets.asset_keys import TRAINING_JOB
from retrain_assets.models.lineage import metadata_for_run_key


class HandoffStepError(RuntimeError):
    """A step of the hand-off failed; the message says which, for whom and on what window."""


def snapshot_window(instance: dg.DagsterInstance, customer: str, run_key: str) -> str:
    """Return the run key's snapshot window as `training_job` recorded it, e.g. 'a .. b'."""
    snapshot = metadata_for_run_key(instance, TRAINING_JOB, customer, run_key).get("snapshot")
    if isinstance(snapshot, dict) and snapshot.get("first_day") and snapshot.get("last_day"):
        return f"{snapshot['first_day']} .. {snapshot['last_day']}"
    return "window not recorded"


@contextlib.contextmanager
def doing(what: str, customer: str, run_key: str, window: str) -> Iterator[None]:
    """Run a step; re-raise any error as `HandoffStepError` naming the step and its inputs."""
    try:
        yield
    except HandoffStepError:
        raise
    except Exception as err:
        raise HandoffStepError(
            f"{what} for {customer}, run key {run_key}, snapshot {window}: "
            f"{type(err).__name__}: {err}"
        ) from err
