"""The settings in force now: the model built from the environment, or one clear refusal.

Every accessor asks `current_settings()` when it is called, so a test's monkeypatched variable
or the environment `up` gives a child is what counts, and every process calls it once before it
starts anything, so a bad value stops it there. A refusal names each bad variable, its value and
what it must be, e.g. `RETRAIN_POLL_INTERVAL_SECONDS=0: must be a whole number >= 1`.
"""

from __future__ import annotations

import functools
import os

from pydantic import ValidationError

from retrain_assets.settings_model.describe import requirement
from retrain_assets.settings_model.model import FIELDS, PREFIX, RetrainSettings, env_name

# Variables the model reads without the RETRAIN_ prefix (a field's alias), e.g. MLflow's own.
ALIASES = {env_name(field): field for field in FIELDS if not env_name(field).startswith(PREFIX)}


class SettingsError(ValueError):
    """Settings the model refuses: the message names each variable, its value and its range."""


def current_settings() -> RetrainSettings:
    """Return the settings the environment sets now (built once per distinct environment).

    Raises:
        SettingsError: a variable is malformed or out of range.
    """
    built = _built(_relevant_environment())
    if isinstance(built, SettingsError):
        raise SettingsError(str(built))
    return built


def check_settings() -> RetrainSettings:
    """Validate every setting before a process starts anything; return them.

    Raises:
        SettingsError: a variable is malformed or out of range (the message names each one).
    """
    return current_settings()


def _relevant_environment() -> tuple[tuple[str, str], ...]:
    """Return the variables the model reads (its cache key): RETRAIN_* and the aliases."""
    return tuple(
        sorted(
            (name, value)
            for name, value in os.environ.items()
            if name.upper().startswith(PREFIX) or name.upper() in ALIASES
        )
    )


@functools.lru_cache(maxsize=64)
def _built(environment: tuple[tuple[str, str], ...]) -> RetrainSettings | SettingsError:
    """Return the model for this environment, or the refusal (both kept: the key decides)."""
    del environment  # the cache key only: pydantic-settings reads os.environ itself
    try:
        return RetrainSettings()
    except ValidationError as error:
        return SettingsError(refusal(error))


def refusal(error: ValidationError) -> str:
    """Return the model's refusal as one message: `NAME=value: must be ...`, one per variable."""
    said: dict[str, str] = {}
    for item in error.errors(include_url=False):
        if not item["loc"]:  # a rule across fields: its message names them
            text = str(item.get("ctx", {}).get("error", item["msg"]))
            said.setdefault(text, text)
            continue
        field = ALIASES.get(str(item["loc"][0]), str(item["loc"][0]))
        reason = item.get("ctx", {}).get("error") if item["type"] == "value_error" else None
        detail = f" ({reason})" if reason else ""
        must = f"must be {requirement(field)}{detail}"
        said.setdefault(field, f"{env_name(field)}={item['input']}: {must}")
    return "; ".join(said.values())
