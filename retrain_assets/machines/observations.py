"""A machine's moves as Dagster observations on the asset it belongs to, per customer partition.

The state machines live in Postgres, but the people who run the platform live in the Dagster
UI: every move of a customer's machine (training on `training_job`, rollout on
`deployment_decision`) appears on that customer's partition of the asset, with its state, why,
the visits left and the job. Only moves are observed, never a wait that yielded in place, so
the event log grows with what happened, not with how long it took.
"""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from retrain_assets.machines.engine import AdvanceResult
from retrain_assets.machines.store import Pointer
from retrain_assets.machines.table import Machine


def visits_left(machine: Machine, p: Pointer) -> int | None:
    """Return how many more visits the pointer's state may have (None: unlimited or terminal)."""
    state = machine.states.get(p.state)
    if state is None or state.max_visits is None:
        return None
    return max(state.max_visits - p.visits.get(p.state, 0), 0)


def transition_observations(
    asset_key: dg.AssetKey,
    machine: Machine,
    before: Mapping[str, str],
    results: Mapping[str, AdvanceResult],
    progress: Mapping[str, str] | None = None,
) -> list[dg.AssetObservation]:
    """Return one observation per customer whose machine changed state in this advance.

    Args:
        asset_key: the asset whose customer partitions show the machine.
        machine: the table the pointers belong to.
        before: each advanced customer's state before the advance.
        results: what `advance_many` returned.
        progress: optional words per customer (e.g. a job's rounds done) to show as well.
    """
    observations = []
    for customer, p in sorted(_moves(before, results).items()):
        metadata: dict[str, dg.RawMetadataValue] = {
            "machine": machine.name,
            "state": p.state,
            "previous_state": before.get(customer, ""),
            "status": p.status,
            "run_key": p.run_key,
            "reason": p.reason or p.last_error or "",
        }
        left = visits_left(machine, p)
        if left is not None:
            metadata["visits_left"] = left
        if "job_id" in p.payload:
            metadata["job_id"] = str(p.payload["job_id"])
        if progress and customer in progress:
            metadata["progress"] = progress[customer]
        observations.append(
            dg.AssetObservation(asset_key=asset_key, partition=customer, metadata=metadata)
        )
    return observations


def _moves(before: Mapping[str, str], results: Mapping[str, AdvanceResult]) -> dict[str, Pointer]:
    """Return the pointers that changed state; filtered before sorting, as most ticks only wait."""
    moved = {}
    for customer, result in results.items():
        p = result.pointer
        if p is None or result.error is not None or not result.steps:
            continue
        if before.get(customer) != p.state:  # a wait that yielded in place is not a move
            moved[customer] = p
    return moved
