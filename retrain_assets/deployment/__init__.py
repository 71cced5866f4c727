"""Deployment as its own rollout: decisions, the canary steps' analysis, routes and the audit.

Kept in one package next to `models` (which trains and registers): everything here starts
from an explicit deployment decision and ends in `serving_routes` and the MLflow aliases.
"""
