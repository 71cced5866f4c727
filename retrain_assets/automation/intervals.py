"""How often each sensor ticks: read from the environment when the code location is built.

Never at import: `definitions.build_definitions()` reads every interval and gives it to the
sensor's factory, so a bad value is one error naming the variable and the value, raised where
the location is built, and a module imported for anything else (a test, the CLI) reads nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from retrain_assets.deployment.rollout_settings import DEFAULTS as ROLLOUT_DEFAULTS


@dataclass(frozen=True)
class Interval:
    """A sensor's tick interval: the variable that sets it and its default."""

    variable: str
    default: int


POLL = Interval("RETRAIN_POLL_INTERVAL_SECONDS", 180)  # one POLL_JOB visit per tick (100)
POLICY = Interval("RETRAIN_POLICY_INTERVAL_SECONDS", 300)
ROLLOUT = Interval("RETRAIN_ROLLOUT_INTERVAL_SECONDS", ROLLOUT_DEFAULTS.interval_seconds)
LANDING = Interval("RETRAIN_LANDING_INTERVAL_SECONDS", 60)
SERVING = Interval("RETRAIN_SERVING_REPORT_INTERVAL_SECONDS", 60)


class InvalidInterval(ValueError):
    """A tick interval variable that is not a positive whole number (the message names it)."""


def interval_seconds(interval: Interval, environ: Mapping[str, str] | None = None) -> int:
    """Return the interval's value in `environ` (default: ours), its default when unset.

    Raises:
        InvalidInterval: the variable is set to anything but a positive whole number.
    """
    text = (os.environ if environ is None else environ).get(interval.variable, "").strip()
    if not text:
        return interval.default
    if not text.isdigit() or int(text) < 1:
        raise InvalidInterval(
            f"{interval.variable} must be a positive whole number of seconds, not {text!r}"
        )
    return int(text)
