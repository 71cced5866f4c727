"""Deployments = decisions: the audit of champion moves, rollouts, aliases and routes.

The rule: every move of alias `champion` matches exactly one deployment decision and one
finished (promoted) rollout, and every decision has at most one rollout. Checked on both
sides: the project's records (`champion_moves`, `rollouts`, `deployment_decisions`) among
themselves, and the MLflow registry against them: the version alias `champion` points at must
be the one the last recorded move made champion (tagged with that decision), alias `canary`
only on the version of a rollout in a canary step, and `serving_routes` naming the same
versions as the aliases. `retrain-assets audit` and the `deployments_match_decisions` check on
`deployment_decision` both run it.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlflow.exceptions import MlflowException

from retrain_assets.deployment.routes import read_routes
from retrain_assets.registry.mlflow_registry import (
    CANARY,
    CHAMPION,
    DECISION_TAG,
    MODEL_PREFIX,
    MlflowRegistry,
    model_name,
)
from retrain_assets.store.database import transaction


@dataclass(frozen=True)
class DeploymentProblem:
    """One mismatch between deployments and decisions, said in a sentence."""

    customer: str
    message: str


def audit_deployments(
    url: str, registry: MlflowRegistry, customer: str | None = None
) -> list[DeploymentProblem]:
    """Return every mismatch (of one customer, or of all), records first, then the registry."""
    problems = _record_problems(url, customer)
    moves = _last_moves(url, customer)
    rolling = _rolling_canaries(url, customer)
    routes = read_routes(url, [customer] if customer else None)
    names = {customer} if customer else set(moves) | set(routes) | _registered(registry)
    for name in sorted(names):
        problems += _registry_problems(
            registry, name, moves.get(name), rolling.get(name), routes.get(name)
        )
    return problems


def _rows(url: str, sql: str, customer: str | None) -> list[tuple]:
    with transaction(url) as cur:
        cur.execute(sql, {"customer": customer})
        return cur.fetchall()


_ONE = "(%(customer)s::text IS NULL OR {column} = %(customer)s)"


def _record_problems(url: str, customer: str | None) -> list[DeploymentProblem]:
    """Check champion_moves, rollouts and decisions against each other."""
    found = []
    for name, move, decision, version, rollout, outcome, rollout_decision, rollout_version in _rows(
        url,
        "SELECT m.customer, m.id, m.decision_id, m.to_version, r.id, r.outcome, r.decision_id,"
        " r.version FROM champion_moves m JOIN rollouts r ON r.id = m.rollout_id"
        f" WHERE {_ONE.format(column='m.customer')} ORDER BY m.id",
        customer,
    ):
        if outcome != "promoted" or rollout_decision != decision or rollout_version != version:
            found.append(
                DeploymentProblem(
                    name,
                    (
                        f"champion move {move} (decision {decision}, to version {version})"
                        f" does not match its rollout {rollout} (decision {rollout_decision},"
                        f" version {rollout_version}, outcome {outcome or 'in progress'})"
                    ),
                )
            )
    for name, rollout, decision in _rows(
        url,
        "SELECT r.customer, r.id, r.decision_id FROM rollouts r WHERE r.outcome = 'promoted'"
        " AND NOT EXISTS (SELECT 1 FROM champion_moves m WHERE m.rollout_id = r.id)"
        f" AND {_ONE.format(column='r.customer')} ORDER BY r.id",
        customer,
    ):
        found.append(
            DeploymentProblem(
                name,
                (
                    f"rollout {rollout} (decision {decision}) was promoted but no champion move "
                    "is recorded for it"
                ),
            )
        )
    for name, decision, count in _rows(
        url,
        "SELECT d.customer, d.id, count(r.id) FROM deployment_decisions d JOIN rollouts r"
        f" ON r.decision_id = d.id WHERE {_ONE.format(column='d.customer')}"
        " GROUP BY d.customer, d.id HAVING count(r.id) > 1 ORDER BY d.id",
        customer,
    ):
        found.append(DeploymentProblem(name, f"decision {decision} has {count} rollouts"))
    return found


def _last_moves(url: str, customer: str | None) -> dict[str, tuple[int, str, int]]:
    """Return customer -> (move id, version, decision id) of its latest champion move."""
    rows = _rows(
        url,
        "SELECT DISTINCT ON (customer) customer, id, to_version, decision_id FROM champion_moves"
        f" WHERE {_ONE.format(column='customer')} ORDER BY customer, id DESC",
        customer,
    )
    return {name: (move, version, decision) for name, move, version, decision in rows}


def _rolling_canaries(url: str, customer: str | None) -> dict[str, str]:
    """Return customer -> version of its rollout in a canary step (alias `canary` expected)."""
    rows = _rows(
        url,
        "SELECT r.customer, r.version FROM rollouts r JOIN machine_pointers p"
        " ON p.machine = 'rollout' AND p.customer = r.customer"
        " AND p.run_key = 'deploy-' || r.decision_id"
        " WHERE r.outcome IS NULL AND p.payload ? 'canary_set'"
        f" AND {_ONE.format(column='r.customer')}",
        customer,
    )
    return dict(rows)


def _registered(registry: MlflowRegistry) -> set[str]:
    """Return every customer with a registered model `demand_forecast.<customer>`."""
    pattern = f"name LIKE '{MODEL_PREFIX}%'"
    models = registry.client.search_registered_models(filter_string=pattern, max_results=1000)
    found, token = [*models], getattr(models, "token", None)
    while token:
        more = registry.client.search_registered_models(
            filter_string=pattern, max_results=1000, page_token=token
        )
        found += more
        token = getattr(more, "token", None)
    return {model.name.removeprefix(MODEL_PREFIX) for model in found}


def _registry_problems(
    registry: MlflowRegistry,
    customer: str,
    last_move: tuple[int, str, int] | None,
    rolling: str | None,
    route: object | None,
) -> list[DeploymentProblem]:
    """Check one customer's aliases against its last move, its rollout and its route."""
    aliases = registry.aliases(customer)
    name, found = model_name(customer), []
    champion, canary = aliases.get(CHAMPION), aliases.get(CANARY)

    def problem(message: str) -> None:
        found.append(DeploymentProblem(customer, message))

    if last_move is None and champion is not None:
        problem(
            f"{name} v{champion} has alias champion but no deployment decision moved it "
            "there (no champion move recorded)"
        )
    elif last_move is not None:
        move, version, decision = last_move
        if champion != version:
            problem(
                f"{name} alias champion is on {f'v{champion}' if champion else 'no version'}"
                f" but the last recorded move ({move}, decision {decision}) made v{version} "
                "champion: a champion move without a decision"
            )
        else:
            tagged = _decision_tag(registry, customer, version)
            if tagged != str(decision):
                problem(
                    f"{name} v{version} is champion by decision {decision} but is tagged "
                    f"{DECISION_TAG}={tagged}"
                )
    if canary != rolling:
        problem(
            f"{name} alias canary is on {f'v{canary}' if canary else 'no version'} but the "
            f"rollout in progress canaries {f'v{rolling}' if rolling else 'nothing'}"
        )
    if route is not None:
        routed = (getattr(route, "champion_version", None), getattr(route, "canary_version", None))
        if routed != (champion, canary):
            problem(
                f"serving_routes sends {customer} to champion {routed[0]} / canary "
                f"{routed[1]} but the aliases say champion {champion} / canary {canary}"
            )
    return found


def _decision_tag(registry: MlflowRegistry, customer: str, version: str) -> str | None:
    try:
        return registry.client.get_model_version(model_name(customer), version).tags.get(
            DECISION_TAG
        )
    except MlflowException as err:
        if err.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise
