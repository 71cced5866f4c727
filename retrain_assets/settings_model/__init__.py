"""Every RETRAIN_* setting as one typed model, and the settings in force now.

`model.py` holds `RetrainSettings` (each field's type, default, bounds and description),
`current.py` builds it from the environment when asked and refuses a bad value with one
message, `describe.py` says a field's rule in words. Below every other package (layer 0), so
each one can read its settings here.
"""

from retrain_assets.settings_model.current import (
    SettingsError,
    check_settings,
    current_settings,
)
from retrain_assets.settings_model.describe import number_text, requirement
from retrain_assets.settings_model.model import FIELDS, RetrainSettings, env_name

__all__ = [
    "FIELDS",
    "RetrainSettings",
    "SettingsError",
    "check_settings",
    "current_settings",
    "env_name",
    "number_text",
    "requirement",
]
