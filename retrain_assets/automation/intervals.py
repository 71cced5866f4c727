"""How often each sensor ticks: read from the settings when the code location is built.

Never at import: `definitions.build_definitions()` reads every interval and gives it to the
sensor's factory, so a bad value is one error naming the variable and the value, raised where
the location is built, and a module imported for anything else (a test, the CLI) reads nothing.
The values, defaults and bounds are `RetrainSettings` fields (settings_model/model.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from retrain_assets.settings_model import FIELDS, current_settings, env_name


@dataclass(frozen=True)
class Interval:
    """A sensor's tick interval: the settings field that holds it."""

    field: str

    @property
    def variable(self) -> str:
        """Return the environment variable that sets it."""
        return env_name(self.field)

    @property
    def default(self) -> int:
        """Return its default, the model's."""
        return int(FIELDS[self.field].default)


POLL = Interval("poll_interval_seconds")  # one POLL_JOB visit per tick (100)
POLICY = Interval("policy_interval_seconds")
ROLLOUT = Interval("rollout_interval_seconds")
LANDING = Interval("landing_interval_seconds")
SERVING = Interval("serving_report_interval_seconds")


def interval_seconds(interval: Interval) -> int:
    """Return the interval's value in the current settings (its default when unset).

    Raises:
        SettingsError: the variable (or another setting) is malformed or out of range.
    """
    return int(getattr(current_settings(), interval.field))
