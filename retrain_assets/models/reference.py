"""What a candidate must beat: the champion, else the current challenger, else seasonal naive.

Before a first champion the gate once compared every candidate with seasonal naive, so a
candidate worse than the registered challenger on the same holdout could still pass and take
its alias: the registry regressed. The reference is therefore the best model the registry
stands behind: the champion when there is one, else the challenger, each loaded and scored now.
A version of the candidate's own run key is never its reference (a re-gate of the challenger
is compared with what stands behind it, not with itself).
"""

from __future__ import annotations

from dataclasses import dataclass

from retrain_assets.models.gate import ReferenceModel, booster_predictor
from retrain_assets.registry.mlflow_registry import (
    CHALLENGER,
    CHAMPION,
    RUN_KEY_TAG,
    MlflowRegistry,
    model_name,
)


@dataclass(frozen=True)
class ChosenReference:
    """The model the gate scores against (None: seasonal naive) and the current champion."""

    model: ReferenceModel | None
    champion_version: str | None


def choose_reference(registry: MlflowRegistry, customer: str, run_key: str) -> ChosenReference:
    """Return the customer's reference for the candidate of `run_key`, loaded from the registry."""
    champion = registry.aliased_version(customer, CHAMPION)
    for alias, version in (
        (CHAMPION, champion),
        (CHALLENGER, registry.aliased_version(customer, CHALLENGER)),
    ):
        if version is None or version.tags.get(RUN_KEY_TAG) == run_key:
            continue
        booster = registry.load_version(customer, str(version.version))
        model = ReferenceModel(
            f"{alias} {model_name(customer)} v{version.version}",
            booster_predictor(booster),
            alias,
            str(version.version),
        )
        return ChosenReference(model, str(champion.version) if champion else None)
    return ChosenReference(None, str(champion.version) if champion else None)
