"""Registering a model version in MLflow and routing a customer to it, for the service tests."""

from __future__ import annotations

import uuid

from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.prediction_intervals import METADATA_KEY, IntervalTable
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.store.database import transaction
from retrain_assets_tests.serving.models import feature_frame


def register(
    registry: MlflowRegistry, customer: str, booster, intervals: IntervalTable | None = None
) -> str:
    run_key = uuid.uuid4().hex[:16]
    run_id = registry.candidate_run(customer, run_key)
    example = feature_frame(
        5, extra=tuple(n for n in booster.feature_name() if n not in MODEL_FEATURES)
    )
    metadata = {METADATA_KEY: intervals.as_metadata()} if intervals else None
    registry.log_candidate(run_id, booster, {"holdout_wape": 0.1}, example, None, metadata)
    return registry.register(customer, run_key, run_id)


def set_route(url, customer, champion, canary=None, weight=0.0, rollout=None, step=None):
    with transaction(url) as cur:
        cur.execute(
            "INSERT INTO serving_routes (customer, champion_version, canary_version, "
            "canary_weight, rollout_id, step) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (customer) DO UPDATE SET champion_version = EXCLUDED.champion_version, "
            "canary_version = EXCLUDED.canary_version, canary_weight = EXCLUDED.canary_weight, "
            "rollout_id = EXCLUDED.rollout_id, step = EXCLUDED.step, "
            "updated_at = clock_timestamp()",
            (customer, champion, canary, weight, rollout, step),
        )
