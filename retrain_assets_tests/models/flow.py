"""Driving the model assets as the daemon would: materialize, tick the poller, run a request.

Shared by the model flows (training, gate, hand-off): each materializes `training_job` on a
Postgres-backed instance, ticks `gpu_job_poller` until it requests the candidate run, and
executes that request with its checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg

from retrain_assets.automation.gpu_job_poller import gpu_job_poller
from retrain_assets.definitions import build_definitions
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.models.resources import GpuServiceResource
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets_tests.support.waiting import wait_until

CUSTOMER = "alpha-us"
STRONG = {"num_boost_round": 200}  # WAPE ~0.33 on alpha-us against seasonal naive's ~0.36


def train_config(**extra: Any) -> dict[str, Any]:
    """Run config of `training_job` on the 50 published days, with `extra` overrides."""
    return {
        "ops": {
            "training_job": {
                "config": {
                    "first_day": "2025-01-01",
                    "last_day": "2025-02-19",
                    "holdout_days": 7,
                    "num_boost_round": 40,
                    "checkpoint_every": 10,
                    **extra,
                }
            }
        }
    }


def materialize(
    instance: dg.DagsterInstance,
    selection: Sequence[dg.AssetsDefinition],
    run_config: dict[str, Any],
    raise_on_error: bool = True,
    customer: str = CUSTOMER,
) -> dg.ExecuteInProcessResult:
    """Materialize `selection` (of training_job, model_candidate) for one customer."""
    defs = build_definitions()
    return dg.materialize(
        [training_job, model_candidate],
        selection=selection,
        partition_key=customer,
        run_config=run_config,
        instance=instance,
        resources=defs.resources,
        raise_on_error=raise_on_error,
    )


def tick(instance: dg.DagsterInstance) -> dg.SensorResult:
    """One tick of `gpu_job_poller` on the environment's database and GPU service."""
    context = dg.build_sensor_context(
        instance=instance,
        resources={
            "project_db": ProjectDatabase(),
            "partition_storage": PartitionStorage(),
            "gpu_service": GpuServiceResource(),
        },
    )
    return gpu_job_poller(context)


def poll_until_requested(
    instance: dg.DagsterInstance,
    seconds: float = 60,
    customer: str = CUSTOMER,
    moves: list[Any] | None = None,
) -> dg.RunRequest:
    """Tick until the customer's candidate run is requested; `moves` collects observations."""
    requested: list[dg.RunRequest] = []

    def candidate_requested() -> bool:
        result = tick(instance)
        if moves is not None:
            moves.extend(e for e in result.asset_events if e.partition == customer)
        requested.extend(r for r in result.run_requests or [] if r.partition_key == customer)
        return bool(requested)

    wait_until(candidate_requested, seconds, f"the poller requesting {customer}'s candidate run")
    return requested[0]


def execute(
    instance: dg.DagsterInstance,
    request: dg.RunRequest,
    selection: Sequence[dg.AssetKey] | None = None,
) -> dg.ExecuteInProcessResult:
    """Run what the request selects (checks included), as the daemon would launch it.

    Then one poller tick, as the daemon's next one: it ends the hand-off the run completed.
    """
    keys = selection or request.asset_selection
    job = build_definitions().resolve_implicit_job_def_def_for_assets(keys)
    if selection is None and request.asset_check_keys is not None:
        # the checks the request names, as the daemon runs them (not every check of the assets)
        job = job.get_subset(
            asset_selection=set(keys), asset_check_selection=set(request.asset_check_keys)
        )
    result = job.execute_in_process(
        run_config=request.run_config,
        instance=instance,
        partition_key=request.partition_key,
        asset_selection=None if job.is_subset else keys,
        tags=request.tags,
        raise_on_error=False,
    )
    tick(instance)
    return result
