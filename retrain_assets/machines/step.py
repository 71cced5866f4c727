"""What a transition sees (`Context`) and what it hands back (`Step`).

Transitions never move the pointer themselves: they return a `Step` and the engine routes it
through the table, so every move is recorded and every route is visible in the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

S = TypeVar("S")


@dataclass(frozen=True)
class Context(Generic[S]):
    """One visit of one state: whose run it is, the persisted payload and the services.

    `payload` is read-only here; a transition changes it by returning `Step.payload`, so the
    engine persists exactly what the history says happened. `prefetched` carries facts the caller
    already fetched (e.g. one batched job-status call for many customers) so a transition need
    not fetch them again.
    """

    machine: str
    customer: str
    run_key: str
    state: str
    visit: int
    payload: Mapping[str, Any]
    services: S
    prefetched: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """The result of one transition.

    Attributes:
        ok: follow `on_success` (True) or `on_failure` (False).
        yielded: persist and return; the next advance resumes in this same state.
        branch: take the state's named branch instead of on_success/on_failure.
        payload: keys to merge into the run's persisted payload (JSON-able values).
        note: free text for the history row.
        error: what went wrong, for the history row (failed steps).
        clear_error: the pointer's `last_error` no longer holds (e.g. the service is back).
    """

    ok: bool
    yielded: bool = False
    branch: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)
    note: str | None = None
    error: str | None = None
    clear_error: bool = False

    @classmethod
    def success(
        cls,
        note: str | None = None,
        *,
        branch: str | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> Step:
        """Return a successful step (on_success, or `branch` when given)."""
        return cls(ok=True, branch=branch, payload=dict(payload or {}), note=note)

    @classmethod
    def failure(
        cls,
        error: str,
        *,
        branch: str | None = None,
        payload: Mapping[str, Any] | None = None,
        note: str | None = None,
    ) -> Step:
        """Return a failed step (on_failure, or `branch` when given) carrying its error."""
        return cls(ok=False, branch=branch, payload=dict(payload or {}), note=note, error=error)

    @classmethod
    def wait(cls, note: str | None = None, *, payload: Mapping[str, Any] | None = None) -> Step:
        """Return a yield: nothing to do yet, come back to this state on the next advance."""
        return cls(ok=True, yielded=True, payload=dict(payload or {}), note=note)
