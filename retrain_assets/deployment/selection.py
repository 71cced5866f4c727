"""What a finished training job's run selects: registration, and deployment with `auto_deploy`.

Left to Dagster, a run of `registered_model` would also run every check on it, including the
deploy-time check `challenger_beats_champion_now`, so every registration would score against
the champion for a deployment nobody decided. The selection therefore names its checks: every
check of the selected assets, without the deploy-time one unless `deployed_model` is selected
(the customer's `auto_deploy` is on and no rollout is in progress), in which case the blocking
deploy-time check runs between `registered_model` and `deployed_model`.
"""

from __future__ import annotations

import functools
from typing import TypedDict

import dagster as dg

from retrain_assets.models.challenger_now_check import CHECK_NAME
from retrain_assets.models.deployed_model_asset import deployed_model
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.models.registered_model_asset import registered_model

DEPLOY_CHECK = dg.AssetCheckKey(registered_model.key, CHECK_NAME)


class RegistrationSelection(TypedDict):
    """The RunRequest arguments `registration_selection` returns (typed for `**` unpacking)."""

    asset_selection: list[dg.AssetKey]
    asset_check_keys: list[dg.AssetCheckKey]


def registration_selection(auto_deploy: bool) -> RegistrationSelection:
    """Return `asset_selection` and `asset_check_keys` for a finished job's RunRequest."""
    assets = [model_candidate.key, registered_model.key]
    if auto_deploy:
        assets.append(deployed_model.key)
    checks = [
        key
        for key in sorted(_checks_of(tuple(assets)), key=lambda k: k.to_user_string())
        if auto_deploy or key != DEPLOY_CHECK
    ]
    return {"asset_selection": assets, "asset_check_keys": checks}


@functools.cache
def _checks_of(assets: tuple[dg.AssetKey, ...]) -> frozenset[dg.AssetCheckKey]:
    """Return every check of `assets` in the code location (read once per process)."""
    from retrain_assets.definitions import defs  # the location imports this module itself

    return frozenset(defs.resolve_asset_graph().get_check_keys_for_assets(set(assets)))
