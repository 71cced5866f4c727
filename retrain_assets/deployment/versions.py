"""The registered version a deployment is about: the challenger, with its run key.

The challenger is whatever version alias `challenger` points at when the deployment runs (the
latest registered candidate); its run key is the version's `run_key` tag.
"""

from __future__ import annotations

from dataclasses import dataclass

from retrain_assets.registry.mlflow_registry import (
    CHALLENGER,
    RUN_KEY_TAG,
    MlflowRegistry,
    model_name,
)


class NoChallenger(LookupError):
    """The customer has no version with alias `challenger` (nothing registered to deploy)."""


@dataclass(frozen=True)
class RegisteredVersion:
    """One version of `demand_forecast.<customer>` and the run key it was trained under."""

    customer: str
    version: str
    run_key: str

    @property
    def label(self) -> str:
        """Return e.g. `demand_forecast.acme v3`."""
        return f"{model_name(self.customer)} v{self.version}"


def challenger_of(registry: MlflowRegistry, customer: str) -> RegisteredVersion:
    """Return the version alias `challenger` points at.

    Raises:
        NoChallenger: nothing is registered for the customer, or no version has the alias.
    """
    version = registry.aliases(customer).get(CHALLENGER)
    if version is None:
        raise NoChallenger(
            f"{model_name(customer)} has no version with alias {CHALLENGER}: register a "
            "candidate that passes beats_champion first"
        )
    found = registry.client.get_model_version(model_name(customer), version)
    return RegisteredVersion(customer, version, found.tags.get(RUN_KEY_TAG) or f"v{version}")
