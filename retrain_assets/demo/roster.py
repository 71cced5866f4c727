"""Which tenants the live demo lands: the three demo tenants, or a seeded scenario's.

The one place the demo's tenants are chosen, so `simulate`, the first `up`, the demo clock and
its pacing all land and wait on the same tenants: RETRAIN_DEMO_SCENARIO_SEED, when set, swaps
the three demo tenants for `scenario_tenants(seed)`.
"""

from __future__ import annotations

from retrain_assets.demo.scenarios import scenario_tenants
from retrain_assets.demo.tenants import DEMO_TENANTS, TenantSpec
from retrain_assets.settings_model import RetrainSettings, current_settings


def demo_tenants(settings: RetrainSettings | None = None) -> tuple[TenantSpec, ...]:
    """Return the live demo's tenants under `settings` (default: the settings in force now).

    Raises:
        SettingsError: the settings in force are refused (when `settings` is not given).
    """
    seed = (settings or current_settings()).demo_scenario_seed
    return DEMO_TENANTS if seed is None else scenario_tenants(seed)
