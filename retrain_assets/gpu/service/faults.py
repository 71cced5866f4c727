"""Injected failures, so the platform's retry, resume and timeout paths can be tested for real.

Only a service started with `allow_faults` accepts specs that carry faults, and a fault fires
only on the attempts it lists: a resubmission (the next attempt) then runs clean and shows
that training resumed from the checkpoint instead of starting over.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from retrain_assets.gpu.service.schemas import Faults

log = logging.getLogger(__name__)


class InjectedFailure(RuntimeError):
    """The failure a spec asked for with `fail_at_round`."""


@dataclass(frozen=True)
class FaultPlan:
    """The faults that apply to this attempt (all None when the attempt runs clean)."""

    fail_at_round: int | None = None
    crash_at_round: int | None = None
    slow_seconds_per_round: float | None = None

    @classmethod
    def for_attempt(cls, faults: Faults | None, attempt: int) -> FaultPlan:
        """Return the plan for `attempt`: the spec's faults if it lists the attempt, else none."""
        if faults is None or attempt not in faults.on_attempts:
            return cls()
        return cls(faults.fail_at_round, faults.crash_at_round, faults.slow_seconds_per_round)

    def before_round(self, round_no: int) -> None:
        """Run before training round `round_no` (1-based): crash or fail if asked to."""
        if self.crash_at_round == round_no:
            log.warning("injected crash at round %d: exiting the worker process", round_no)
            logging.shutdown()
            os._exit(1)  # a real crash: no cleanup, no outcome recorded
        if self.fail_at_round == round_no:
            raise InjectedFailure(f"injected failure at round {round_no}")

    def after_round(self, round_no: int) -> None:
        """Run after round `round_no`: slow the training down if asked to."""
        if self.slow_seconds_per_round:
            time.sleep(self.slow_seconds_per_round)
