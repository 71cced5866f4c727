"""Every asset check of the model side, in one list: the code location and the runs use it.

`definitions.py` registers these checks, and a registration run selects the ones on its assets
(`automation/registration_selection.py`), so a check added here is in both; nothing below the
code location has to import `definitions` to learn what it holds.
"""

from __future__ import annotations

import dagster as dg

from retrain_assets.models.beats_champion_check import beats_champion
from retrain_assets.models.challenger_now_check import challenger_beats_champion_now
from retrain_assets.models.deployment_audit_check import deployments_match_decisions
from retrain_assets.models.registry_audit_check import one_version_per_run_key

MODEL_CHECKS: tuple[dg.AssetChecksDefinition, ...] = (
    beats_champion,
    one_version_per_run_key,
    challenger_beats_champion_now,
    deployments_match_decisions,
)


def checks_of(assets: set[dg.AssetKey]) -> frozenset[dg.AssetCheckKey]:
    """Return the keys of every model-side check on one of `assets`."""
    return frozenset(
        key for check in MODEL_CHECKS for key in check.check_keys if key.asset_key in assets
    )
