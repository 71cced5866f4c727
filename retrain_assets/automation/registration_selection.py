"""What a finished training job's run selects: registration, and deployment with `auto_deploy`.

Left to Dagster, a run of `registered_model` would also run every check on it, including the
deploy-time check `challenger_beats_champion_now`, so every registration would score against
the champion for a deployment nobody decided. The selection therefore names its checks: every
check of the selected assets, without the deploy-time one unless `deployment_decision` is selected
(the customer's `auto_deploy` is on and no rollout is in progress), in which case the blocking
deploy-time check runs between `registered_model` and `deployment_decision`, and the deployment
audit on `deployed_model` (independent of both: a failed gate leaves it evaluated, not red).
"""

from __future__ import annotations

from typing import TypedDict

import dagster as dg

from retrain_assets.asset_keys import (
    DEPLOYED_MODEL,
    DEPLOYMENT_DECISION,
    MODEL_CANDIDATE,
    REGISTERED_MODEL,
)
from retrain_assets.models.challenger_now_check import CHECK_NAME
from retrain_assets.models.checks import checks_of

DEPLOY_CHECK = dg.AssetCheckKey(REGISTERED_MODEL, CHECK_NAME)


class RegistrationSelection(TypedDict):
    """The RunRequest arguments `registration_selection` returns (typed for `**` unpacking)."""

    asset_selection: list[dg.AssetKey]
    asset_check_keys: list[dg.AssetCheckKey]


def registration_selection(auto_deploy: bool) -> RegistrationSelection:
    """Return `asset_selection` and `asset_check_keys` for a finished job's RunRequest."""
    assets = [MODEL_CANDIDATE, REGISTERED_MODEL]
    if auto_deploy:
        assets.append(DEPLOYMENT_DECISION)
    # the audit on `deployed_model` (which no run materializes) comes with a decision
    judged = {*assets, DEPLOYED_MODEL} if auto_deploy else set(assets)
    checks = [
        key
        for key in sorted(checks_of(judged), key=lambda k: k.to_user_string())
        if auto_deploy or key != DEPLOY_CHECK
    ]
    return {"asset_selection": assets, "asset_check_keys": checks}
