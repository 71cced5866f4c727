"""The gate in front of the app: the bearer token and the body size, before any body is read.

FastAPI reads a route's body before it runs the route's dependencies, so a token check written
as a dependency lets anyone without the token make the service read (and buffer) a body of any
size. This ASGI middleware answers 401 from the request's headers alone, 413 from a
Content-Length over the limit, and 413 as soon as a body sent without a length (chunked)
grows past it, so an unauthenticated or oversized body is never read into memory.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _BodyTooLarge(Exception):
    """The body grew past the limit while it was being read."""


def error_body(path: str, message: str) -> dict[str, str]:
    """Return an error's JSON: `{"error": ...}` on the v2 paths (the protocol's), else detail."""
    return {"error": message} if path.startswith("/v2") else {"detail": message}


class RequestGuard:
    """Checks `Authorization: Bearer <token>` and the body size of every HTTP request."""

    def __init__(
        self, app: ASGIApp, token: str, max_body_bytes: int, open_paths: frozenset[str]
    ) -> None:
        """Guard `app`; requests to `open_paths` (health, API docs) need no token."""
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.max_body_bytes = max_body_bytes
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401 or 413 without reading the body, or pass the request on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        path = scope.get("path", "")
        if path not in self.open_paths:
            given = headers.get(b"authorization", b"")
            if not secrets.compare_digest(given, self.expected):
                await _answer(
                    send,
                    401,
                    error_body(path, "missing or wrong bearer token"),
                    [(b"www-authenticate", b"Bearer")],
                )
                return
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await _answer(send, 413, error_body(path, self._too_large()))
            return
        await self._pass_on(scope, receive, send, path)

    def _too_large(self) -> str:
        return (
            f"the body is larger than {self.max_body_bytes} bytes: send fewer rows "
            "(see RETRAIN_SERVE_MAX_ROWS)"
        )

    async def _pass_on(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _BodyTooLarge
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _BodyTooLarge:
            if started:
                raise
            await _answer(send, 413, error_body(path, self._too_large()))


async def _answer(
    send: Send, status: int, body: dict[str, str], extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"connection", b"close"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
