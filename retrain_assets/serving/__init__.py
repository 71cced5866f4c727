"""The prediction service: every customer's champion and canary behind one HTTP API.

`retrain-assets serve` reads `serving_routes` (written by the rollout), loads the versions it
names from the MLflow registry, splits traffic by request key and logs every prediction to
`prediction_log`. See docs/serving.md for the API and docs/deployment.md for the contract.
"""
