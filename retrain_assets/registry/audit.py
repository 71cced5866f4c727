"""The registry's invariant, checked: every run key has at most one MLflow run and one version.

Every write of `MlflowRegistry` looks its run key up first, so a duplicate means a race between
replicas or a hand-made run; `retrain-assets audit` and the `one_version_per_run_key` check list
them with the ids to clean up.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from mlflow.entities import Run

from retrain_assets.registry.mlflow_registry import (
    EXPERIMENT_PREFIX,
    MODEL_PREFIX,
    PAGE_SIZE,
    RUN_KEY_TAG,
    MlflowRegistry,
    all_pages,
    experiment_name,
    model_name,
    quoted,
)


@dataclass(frozen=True)
class Problem:
    """A run key that has more than one MLflow run, or more than one registered version."""

    run_key: str
    duplicated: Literal["runs", "versions"]
    where: str
    ids: tuple[str, ...]

    @property
    def message(self) -> str:
        """Say which run key is duplicated, what, where, and the ids to clean up."""
        what = "MLflow runs" if self.duplicated == "runs" else "registered versions"
        place = "experiment" if self.duplicated == "runs" else "model"
        return (
            f"run key {self.run_key} has {len(self.ids)} {what} in {place} {self.where}: "
            f"{', '.join(self.ids)}"
        )


def _runs_page(registry: MlflowRegistry, experiment_id: str, token: str | None) -> list[Run]:
    """Return one page of an experiment's runs (`all_pages` walks them)."""
    return registry.client.search_runs([experiment_id], max_results=PAGE_SIZE, page_token=token)


def audit_registry(registry: MlflowRegistry, customer: str | None = None) -> list[Problem]:
    """Return every run key with more than one MLflow run or registered version.

    Looks at all experiments `demand_forecast/*` (active runs) and all registered models
    `demand_forecast.*`, or at one customer's experiment and model.
    """
    problems: list[Problem] = []
    pattern = experiment_name(customer) if customer else EXPERIMENT_PREFIX + "%"
    experiments = registry.client.search_experiments(filter_string=f"name LIKE {quoted(pattern)}")
    for experiment in experiments:
        runs = all_pages(functools.partial(_runs_page, registry, experiment.experiment_id))
        problems += _duplicates(
            ((run.data.tags.get(RUN_KEY_TAG), run.info.run_id) for run in runs),
            "runs",
            experiment.name,
        )
    model_pattern = model_name(customer) if customer else MODEL_PREFIX + "%"
    models = all_pages(
        lambda token: registry.client.search_registered_models(
            filter_string=f"name LIKE {quoted(model_pattern)}", page_token=token
        )
    )
    for model in models:
        versions = registry.client.search_model_versions(f"name = {quoted(model.name)}")
        problems += _duplicates(
            ((version.tags.get(RUN_KEY_TAG), version.version) for version in versions),
            "versions",
            model.name,
        )
    return problems


def _duplicates(
    keyed: Iterable[tuple[str | None, str]], duplicated: Literal["runs", "versions"], where: str
) -> list[Problem]:
    by_key: dict[str, list[str]] = defaultdict(list)
    for run_key, item in keyed:
        if run_key:
            by_key[run_key].append(item)
    return [
        Problem(run_key, duplicated, where, tuple(sorted(ids, key=lambda i: (len(i), i))))
        for run_key, ids in sorted(by_key.items())
        if len(ids) > 1
    ]
