"""`RequestGuard`: the bearer token and the body size, checked before any byte of the body.

A FastAPI dependency runs only after the body was read and parsed, so an unauthenticated
client could make the service hold (and parse) any amount of JSON. This pure ASGI
middleware looks only at the request line and headers: a missing or wrong token is a 401,
a declared `Content-Length` above the limit a 413, both answered without reading the body.
A body without a length (chunked) is counted as it is read by FastAPI's own `max_body_size`
limit (`create_app`), which answers 413 the moment the count passes the same limit.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

MAX_BODY_BYTES = 1 << 20  # 1 MiB; the largest valid spec (500 features of 200 characters): 110 KB
PUBLIC_PATHS = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
WRONG_TOKEN = "missing or wrong bearer token"


class RequestGuard:
    """Answer 401 without the service's token and 413 for a declared body over the limit."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        max_body_bytes: int = MAX_BODY_BYTES,
        public_paths: Iterable[str] = PUBLIC_PATHS,
    ) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self.max_body_bytes = max_body_bytes
        self.public_paths = frozenset(public_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on only when its headers allow it; never touch `receive` here."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if scope["path"] not in self.public_paths:
            given = headers.get("authorization", "").encode("latin-1", "replace")
            if not secrets.compare_digest(given, self._expected):
                await _answer(send, 401, WRONG_TOKEN, [(b"www-authenticate", b"Bearer")])
                return
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                await _answer(send, 400, "Content-Length is not a number of bytes")
                return
            if int(declared) > self.max_body_bytes:
                await _answer(
                    send, 413, f"request body over the limit of {self.max_body_bytes} bytes"
                )
                return
        await self.app(scope, receive, send)


async def _answer(
    send: Send, status: int, detail: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Send a whole JSON response `{"detail": ...}`.

    The connection stays open: uvicorn drops whatever body the client still sends (it is
    never buffered), and the client reads a clean status instead of a reset connection.
    """
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
