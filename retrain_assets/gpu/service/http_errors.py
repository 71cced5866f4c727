"""How the service answers bad input and a missing database: a 4xx or 503 with the reason.

- JSON is parsed strictly: `NaN`, `Infinity` and numbers too large for a float are not JSON,
  so they are a 422 naming the problem instead of a value that later breaks a response.
- A 422 names each field (its location and what is wrong) and never echoes the value sent:
  an echo of a large body is as large as the body.
- A database that cannot be reached is a 503 "database unavailable", never a 500: the
  platform's client retries on its next tick.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Coroutine
from typing import Any

import psycopg2
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

log = logging.getLogger(__name__)
MAX_LOCATION_PART = 64  # an unknown key in a body shows at most this much of its name
MAX_PROBLEMS = 20
DATABASE_UNAVAILABLE = "database unavailable; retry later"


class _NotFinite(ValueError):
    def __init__(self, literal: str) -> None:
        super().__init__(f"{literal} is not valid JSON (numbers must be finite)")
        self.literal = literal


def _refuse_constant(literal: str) -> float:
    raise _NotFinite(literal)


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _NotFinite(literal[:20])
    return value


def strict_json_loads(body: bytes) -> Any:
    """Parse JSON as RFC 8259 defines it: NaN, Infinity and overflowing numbers are errors.

    Raises json.JSONDecodeError, which FastAPI turns into a 422 `json_invalid`.
    """
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotFinite as error:
        raise json.JSONDecodeError(str(error), text, max(text.find(error.literal), 0)) from error


class StrictJsonRequest(Request):
    """A request whose `json()` is `strict_json_loads` of its body."""

    async def json(self) -> Any:
        """Return the body parsed strictly (once)."""
        if not hasattr(self, "_json"):
            self._json = strict_json_loads(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """A route that parses its JSON body with `strict_json_loads`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """Wrap FastAPI's handler so it sees a StrictJsonRequest."""
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict_handler


def _location(loc: tuple[Any, ...]) -> list[str | int]:
    """Return a field's location without FastAPI's source prefix, each part shortened."""
    parts: list[str | int] = []
    for part in loc:
        if part in ("body", "query", "path", "header"):
            continue
        text = part if isinstance(part, int) else str(part)
        if isinstance(text, str) and len(text) > MAX_LOCATION_PART:
            text = f"{text[:MAX_LOCATION_PART]}..."
        parts.append(text)
    return parts


def _what(item: dict[str, Any]) -> str:
    if item.get("type") == "json_invalid":
        reason = str((item.get("ctx") or {}).get("error", "not JSON"))[:200]
        return f"invalid JSON at character {item['loc'][-1]}: {reason}"
    return str(item.get("msg", "invalid"))[:300]


async def validation_error(_: Request, error: Exception) -> JSONResponse:
    """Answer 422 naming every field and what is wrong with it, never the value sent."""
    assert isinstance(error, RequestValidationError)
    problems = []
    for item in error.errors()[:MAX_PROBLEMS]:
        json_error = item.get("type") == "json_invalid"  # its loc is a character position
        location = [] if json_error else _location(tuple(item.get("loc", ())))
        problems.append({"loc": location, "msg": _what(item), "type": item.get("type")})
    more = len(error.errors()) - len(problems)
    sentence = "; ".join(
        f"{'.'.join(str(p) for p in problem['loc']) or 'body'}: {problem['msg']}"
        for problem in problems
    )
    if more > 0:
        sentence += f"; and {more} more"
    return JSONResponse(
        status_code=422, content={"detail": problems, "message": f"invalid request: {sentence}"}
    )


async def database_unavailable(request: Request, error: Exception) -> JSONResponse:
    """Answer 503 when Postgres cannot be reached; the service keeps running."""
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    log.warning("%s %s: database unavailable: %s", request.method, request.url.path, first_line)
    return JSONResponse(
        status_code=503, content={"detail": DATABASE_UNAVAILABLE}, headers={"Retry-After": "5"}
    )


DATABASE_ERRORS = (psycopg2.OperationalError, psycopg2.InterfaceError)
