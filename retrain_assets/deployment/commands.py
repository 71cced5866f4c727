"""What `retrain-assets deployments`, `rollback` and the deployment audit print and do.

The CLI handlers stay small; the reads, the formatting and the hand abort live here.
"""

from __future__ import annotations

from retrain_assets.deployment.advancing import advance_rollouts
from retrain_assets.deployment.audit import audit_deployments
from retrain_assets.deployment.records import (
    auto_deploy_settings,
    list_deployments,
    request_abort,
    set_auto_deploy,
)
from retrain_assets.deployment.rollout_machine import ROLLED_BACK
from retrain_assets.deployment.routes import read_routes
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.settings import storage_root


def deployment_lines(url: str, customer: str | None, limit: int) -> list[str]:
    """Return the latest decisions, newest first, with their rollout's state and outcome."""
    found = list_deployments(url, customer, limit)
    if not found:
        return [f"no deployment decisions{f' for {customer}' if customer else ''} yet"]
    routes = read_routes(url, sorted({d.decision.customer for d in found}))
    lines = []
    for item in found:
        d, r = item.decision, item.rollout
        if r is None:
            progress = "no rollout"
        elif r.outcome is None:
            route = routes.get(d.customer)
            share = f", canary {route.canary_weight:.0%}" if route and route.canary_version else ""
            progress = f"rollout {r.id} in progress: {item.state}{share}"
        else:
            progress = f"rollout {r.id} {r.outcome} {r.finished_at:%Y-%m-%d %H:%M:%S}"
        replacing = f"v{d.previous_champion}" if d.previous_champion else "no champion"
        lines.append(
            f"{d.id:>6}  {d.decided_at:%Y-%m-%d %H:%M:%S}  {d.customer:<20} v{d.version} "
            f"(run key {d.run_key}) replacing {replacing}  by {d.decided_by}  {progress}, "
            f"{item.analyses} analyses"
            + (f" ({item.inconclusive} inconclusive)" if item.inconclusive else "")
        )
        lines.append(f"        decided: {d.reason}")
        if r is not None and r.abort_reason:
            lines.append(f"        abort requested by {r.abort_by}: {r.abort_reason}")
        if item.last_analysis and (r is None or r.outcome is None):
            lines.append(f"        last analysis: {item.last_analysis}")
        if r is not None and r.reason:
            lines.append(f"        outcome: {r.reason}")
    return lines


def rollback_now(url: str, registry: MlflowRegistry, customer: str, reason: str, by: str) -> str:
    """Record a hand abort and advance the customer's rollout at once; say where it ended.

    Raises:
        DeploymentRefused: no rollout is in progress for the customer, or no reason.
    """
    rollout = request_abort(url, customer, reason, by)
    report = advance_rollouts(
        url, registry, ParquetPartitionStore(storage_root()), customers=[customer]
    )
    result = report.results.get(customer)
    if result is None or result.pointer is None:
        return (
            f"{customer}: abort of rollout {rollout.id} recorded; its machine is being advanced "
            "elsewhere right now (the rollout_controller), which applies the abort"
        )
    if report.problems.get(customer):
        return f"{customer}: abort of rollout {rollout.id} recorded; {report.problems[customer]}"
    pointer = result.pointer
    if pointer.state == ROLLED_BACK:
        return f"{customer}: rollout {rollout.id} rolled back: {pointer.reason}"
    return (
        f"{customer}: abort of rollout {rollout.id} recorded; the rollout is in "
        f"{pointer.state} ({pointer.reason or pointer.last_error or 'retried next tick'})"
    )


def auto_lines(url: str, customer: str | None) -> list[str]:
    """Return each customer's auto_deploy setting (unset customers are off)."""
    settings = auto_deploy_settings(url)
    names = [customer] if customer else sorted(settings)
    if not names:
        return ["auto_deploy is off for every customer (the default)"]
    return [f"{name}: auto_deploy {'on' if settings.get(name) else 'off'}" for name in names]


def set_auto(url: str, customer: str, value: str, by: str) -> str:
    """Turn auto_deploy on or off for one customer; return the new setting as a line."""
    if value not in {"on", "off"}:
        raise ValueError(f"deployments auto: say on or off, not {value!r}")
    set_auto_deploy(url, customer, value == "on", by)
    return auto_lines(url, customer)[0]


def audit_lines(url: str, registry: MlflowRegistry, customer: str | None) -> list[str]:
    """Return one line per deployment mismatch (none: every move matches its decision)."""
    return [f"{p.customer}: {p.message}" for p in audit_deployments(url, registry, customer)]
