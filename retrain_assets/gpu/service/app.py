"""The service process: the FastAPI app (auth, limits, errors, health) and `serve`.

`serve` prepares everything that can fail with a plain reason (port, database, migrations,
the one-service-per-database lock) before uvicorn starts, so a misconfigured start is one
clear line, not a traceback from inside the server. Requests pass `RequestGuard` (token and
declared body size, before the body is read) and FastAPI's streamed body limit; every
malformed input is a 4xx that names the field, and a lost database a 503.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, HTTPException, Response
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from retrain_assets.gpu.service.config import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_SLOTS,
    default_data_dir,
    service_token,
)
from retrain_assets.gpu.service.faults import (
    ANSWER_PATH,
    OUTAGE_PATH,
    InjectedOutage,
    OutageWindow,
)
from retrain_assets.gpu.service.http_errors import (
    DATABASE_ERRORS,
    database_unavailable,
    validation_error,
)
from retrain_assets.gpu.service.http_guard import MAX_BODY_BYTES, RequestGuard
from retrain_assets.gpu.service.job_store import JobStore
from retrain_assets.gpu.service.migrations import migrate
from retrain_assets.gpu.service.routes import build_router
from retrain_assets.gpu.service.scheduler import Scheduler
from retrain_assets.gpu.service.service_lock import ServiceLock
from retrain_assets.server_process import (
    StopSignal,
    check_port_free,
    install_stop_handlers,
    restore_handlers,
)
from retrain_assets.store.server import ensure_database, start_server

log = logging.getLogger(__name__)
_bearer = HTTPBearer(auto_error=False, description="RETRAIN_GPU_TOKEN")


def require_token(token: str) -> Callable[[HTTPAuthorizationCredentials | None], None]:
    """Return a dependency that answers 401 unless the request carries `Bearer <token>`.

    `RequestGuard` already refused such a request before its body was read; this second
    check declares the bearer scheme in the OpenAPI schema and guards any route mounted
    without the middleware.
    """

    def check(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        given = credentials.credentials if credentials else ""
        if not secrets.compare_digest(given.encode(), token.encode()):
            raise HTTPException(
                401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"}
            )

    return check


def create_app(
    store: JobStore, scheduler: Scheduler, token: str, allow_faults: bool = False
) -> FastAPI:
    """Return the service's app.

    Its lifespan starts the scheduler, and on shutdown stops it and the workers, whose jobs
    are requeued to resume on the next start.
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(scheduler.start)
        try:
            yield
        finally:
            await run_in_threadpool(scheduler.stop)

    app = FastAPI(
        title="retrain_assets GPU training service",
        version="1",
        description="Trains LightGBM demand models from exported Parquet datasets, resumably.",
        lifespan=lifespan,
    )
    app.add_middleware(RequestGuard, token=token, max_body_bytes=MAX_BODY_BYTES)
    app.add_exception_handler(RequestValidationError, validation_error)
    for database_error in DATABASE_ERRORS:
        app.add_exception_handler(database_error, database_unavailable)
    app.include_router(
        build_router(store, scheduler, allow_faults), dependencies=[Depends(require_token(token))]
    )
    if allow_faults:
        _install_outage_fault(app, token)

    @app.get(
        "/healthz",
        tags=["health"],
        responses={503: {"description": "the database or the service lock is unavailable"}},
    )
    def healthz(response: Response) -> dict[str, Any]:
        """Answer without auth: 200 only while Postgres answers and the service holds its lock."""
        problem = store.ping()
        held = scheduler.lock_held
        healthy = problem is None and held
        if not healthy:
            response.status_code = 503
        return {
            "status": "ok" if healthy else "unavailable",
            "database": "ok" if problem is None else f"unavailable: {problem}",
            "service_lock": "held" if held else "not held (waiting to take it back)",
            "slots": scheduler.slots,
            "busy_slots": scheduler.busy_slots,
        }

    return app


def _install_outage_fault(app: FastAPI, token: str) -> None:
    """Add `POST /faults/outage`, `POST /faults/answer` and their middleware (allow_faults)."""
    window = OutageWindow()
    app.add_middleware(InjectedOutage, window=window)

    @app.post(OUTAGE_PATH, tags=["faults"], dependencies=[Depends(require_token(token))])
    def start_outage(seconds: float = Body(..., gt=0, le=3600, embed=True)) -> dict[str, Any]:
        """Make every call but /healthz answer 503 for `seconds` (tests of the outage path)."""
        window.start(seconds)
        return {"outage_seconds": seconds}

    @app.post(ANSWER_PATH, tags=["faults"], dependencies=[Depends(require_token(token))])
    def start_answer(
        seconds: float = Body(..., gt=0, le=3600),
        status: int = Body(..., ge=200, le=599),
        body: str = Body(..., max_length=10_000),
    ) -> dict[str, Any]:
        """Make every call but /healthz answer `status` with `body` (text) for `seconds`.

        The answers the platform must record as errors, not as an outage: a 401, a 500 with a
        body, a 200 that does not parse.
        """
        window.start(seconds, status, body)
        return {"answer_seconds": seconds, "status": status}


class LostOwnership(Exception):
    """Another service took the database while this one was cut off from Postgres."""


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    slots: int = DEFAULT_SLOTS,
    allow_faults: bool = False,
    data_dir: Path | str | None = None,
) -> None:
    """Run the GPU training service until SIGINT/SIGTERM.

    Postgres comes from `start_server()` (RETRAIN_PG_URL or the embedded server), in the
    database of purpose `gpu`; files go to `data_dir` (default `$RETRAIN_HOME/gpu`). Jobs a
    previous run left running are requeued and resume from their checkpoints. Raises
    ValueError, with the reason, when the port is taken or another service owns the database,
    and LostOwnership when another service took the database during a Postgres outage.
    """
    import uvicorn  # imported here: worker processes import this package but never serve

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if slots < 1:
        raise ValueError(f"--slots must be at least 1, got {slots}")
    token = service_token()
    folder = Path(data_dir).expanduser().resolve() if data_dir else default_data_dir()
    folder.mkdir(parents=True, exist_ok=True)
    check_port_free(host, port)
    url = ensure_database(start_server(), "gpu")
    migrate(url)
    lock = ServiceLock(url)
    lock.acquire()
    lost: list[str] = []

    def stop_for_good(reason: str) -> None:
        # Called from the scheduler's thread; uvicorn stops gracefully on SIGTERM.
        lost.append(reason)
        os.kill(os.getpid(), signal.SIGTERM)

    # uvicorn shuts down gracefully on SIGINT/SIGTERM and then re-raises the signal to the
    # handler it found installed; with ours that ends `serve` normally (exit 0, atexit runs:
    # the embedded Postgres is stopped if we were its last user) instead of dying of it.
    handlers = install_stop_handlers()
    try:
        store = JobStore(url)
        scheduler = Scheduler(store, folder, slots, lock, on_lost_ownership=stop_for_good)
        app = create_app(store, scheduler, token, allow_faults)
        log.info(
            "GPU service on http://%s:%d: %d slot(s), faults %s, files in %s",
            host,
            port,
            slots,
            "allowed" if allow_faults else "refused",
            folder,
        )
        uvicorn.run(app, host=host, port=port, log_level="info")
    except StopSignal as stop:
        log.info("stopped by %s", stop)
    finally:
        restore_handlers(handlers)
        lock.close()
    if lost:
        raise LostOwnership(lost[0])
