"""Injected failures, so the platform's retry, resume and timeout paths can be tested for real.

Only a service started with `allow_faults` accepts specs that carry faults, and a fault fires
only on the attempts it lists: a resubmission (the next attempt) then runs clean and shows
that training resumed from the checkpoint instead of starting over. Such a service also takes
`POST /faults/outage {"seconds": N}`: every call but /healthz answers 503 for N seconds, and
`POST /faults/answer {"seconds": N, "status": S, "body": "..."}`: every call but /healthz
answers S with that text for N seconds (a refused token, a 500 with a body, an answer that
does not parse: what the platform must not mistake for an outage).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

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


OUTAGE_PATH = "/faults/outage"
ANSWER_PATH = "/faults/answer"
_OUTAGE_EXEMPT = frozenset({"/healthz", OUTAGE_PATH, ANSWER_PATH})


class OutageWindow:
    """When an injected outage ends and what it answers (the fault routes set it).

    `body` None is the outage's own JSON 503; a text is answered as it is, with `status`.
    """

    def __init__(self) -> None:
        self.until = 0.0  # time.monotonic() the outage ends at
        self.status = 503
        self.body: str | None = None

    def start(self, seconds: float, status: int = 503, body: str | None = None) -> None:
        """Answer `status` (and `body`) to every call but /healthz and the faults' for `seconds`."""
        self.until = time.monotonic() + seconds
        self.status, self.body = status, body
        log.warning("injected fault: every call answers %d for %.1f s", status, seconds)

    def left(self) -> float:
        """Return the seconds the outage still lasts (<= 0: none)."""
        return self.until - time.monotonic()


class InjectedOutage:
    """A service-wide fault a test asks for: every call but /healthz answers 503 for a while.

    The platform's client sees what it sees when the service's database is away (503 after
    its retries), so the training machine's outage handling runs against the real service.
    With a `body`, every call gets that answer instead (`POST /faults/answer`). Only a service
    started with `allow_faults` installs it (`app.create_app`).
    """

    def __init__(self, app: ASGIApp, window: OutageWindow) -> None:
        self.app = app
        self.window = window

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 503 during the outage; pass everything through otherwise."""
        left = self.window.left()
        if scope["type"] != "http" or left <= 0 or scope["path"] in _OUTAGE_EXEMPT:
            await self.app(scope, receive, send)
            return
        if self.window.body is None:
            detail = {"detail": f"injected outage: unavailable for {left:.1f} s"}
            body, kind = json.dumps(detail).encode(), b"application/json"
        else:
            body, kind = self.window.body.encode(), b"text/plain; charset=utf-8"
        await send(
            {
                "type": "http.response.start",
                "status": self.window.status,
                "headers": [
                    (b"content-type", kind),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
