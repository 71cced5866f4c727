"""`deployed_model`: the model that serves each customer, materialized only when that changes.

No run computes it. The `serving_report` sensor materializes a customer's partition when the
customer's `champion` moves (a first deployment, a promoted canary), from the recorded move in
`champion_moves`, with the version serving, since when and the decision and rollout that put it
there. So its Partitions tab reads what serves: a failed gate, a refused deploy-time check or a
rolled-back canary changes nothing here (they show on `registered_model` and
`deployment_decision`). Its checks say whether that model is fresh and whether the records agree.
"""

import dagster as dg

from retrain_assets.asset_keys import DEPLOYED_MODEL, DEPLOYMENT_DECISION
from retrain_assets.customers import CUSTOMERS

deployed_model = dg.AssetSpec(
    DEPLOYED_MODEL,
    group_name="models",
    partitions_def=CUSTOMERS,
    deps=[DEPLOYMENT_DECISION],
    kinds={"mlflow"},
    description="The champion serving each customer: materialized by the serving_report sensor "
    "when the champion moves (first deployment, promotion), with its version, since when and "
    "the rollout that put it there.",
)
