"""Every asset's key, written once, for the assets and for all code that names an asset.

The assets take their key from here, and a run request, a run's selection or a storage folder
uses the same constant.

It sits in the lowest layer so that the retraining policy can name `training_job`, and the
policy and the deployment can name the feature assets, without importing the assets above
them (`docs/architecture.md`, Package layers).
"""

from __future__ import annotations

import dagster as dg

SALES = dg.AssetKey("sales")
STORE_DAY_FEATURES = dg.AssetKey("store_day_features")
TRAINING_JOB = dg.AssetKey("training_job")
MODEL_CANDIDATE = dg.AssetKey("model_candidate")
REGISTERED_MODEL = dg.AssetKey("registered_model")
DEPLOYMENT_DECISION = dg.AssetKey("deployment_decision")
DEPLOYED_MODEL = dg.AssetKey("deployed_model")


def name_of(key: dg.AssetKey) -> str:
    """Return the asset's name: its op's name in run config, its folder in partition storage."""
    return key.to_python_identifier()
