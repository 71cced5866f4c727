"""`retrain-assets serve`: the prediction service process, wired and run until SIGTERM.

Everything that can fail with a plain reason (a setting, the port, the database) is checked
before uvicorn starts. Shutdown on SIGINT/SIGTERM is uvicorn's graceful one: it stops
accepting, lets the requests in flight finish (each waits for its log commit), then the app's
lifespan stops the route refresher and drains the prediction log, and `serve` returns.
"""

from __future__ import annotations

import logging
import os
import threading

from retrain_assets.features.countries import countries_of
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.prediction_intervals import IntervalRules, IntervalTable
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.server_process import (
    StopSignal,
    check_port_free,
    install_stop_handlers,
    restore_handlers,
)
from retrain_assets.serving.app import create_app
from retrain_assets.serving.forecaster import Forecaster
from retrain_assets.serving.history import HistoryCache, ParquetHistory, PublicationWatcher
from retrain_assets.serving.model_cache import ModelCache
from retrain_assets.serving.prediction_log import PredictionLogWriter
from retrain_assets.serving.predictor import Predictor
from retrain_assets.serving.routes import Route, RouteRefresher, RouteTable
from retrain_assets.settings import (
    mlflow_tracking_uri,
    serve_max_history_mb,
    serve_max_models,
    serve_max_rows,
    serve_refresh_seconds,
    serve_token,
    storage_root,
)
from retrain_assets.settings_model import current_settings
from retrain_assets.store.resource import ProjectDatabase

DEFAULT_HOST = "127.0.0.1"
TOKEN_ENV = "RETRAIN_SERVE_TOKEN"

log = logging.getLogger(__name__)


def _token() -> str:
    if not current_settings().serve_token:
        log.warning(
            "%s is not set: accepting the development token; set it before exposing the service",
            TOKEN_ENV,
        )
    return serve_token()


class ModelLoader:
    """Loads (customer, version) from the MLflow registry, one load at a time.

    The registry points MLflow's process-wide tracking URI at its server for each load;
    loads are rare (a route move, a cold customer), so they are simply serialized.
    """

    def __init__(self, registry: MlflowRegistry) -> None:
        """Load from `registry`."""
        self.registry = registry
        self._lock = threading.Lock()

    def __call__(self, customer: str, version: str) -> Forecaster:
        """Return the version's forecaster, loaded now."""
        with self._lock:
            booster, metadata = self.registry.load_version_with_metadata(customer, version)
        intervals = IntervalTable.from_metadata(metadata)  # malformed: the load fails, said so
        log.info(
            "loaded model version %s of %s (%s)",
            version,
            customer,
            f"intervals {', '.join(intervals.halfwidths)}" if intervals else "no intervals",
        )
        return Forecaster.of(customer, version, booster, intervals)


def serve(host: str = DEFAULT_HOST, port: int = 8080) -> None:
    """Run the prediction service until SIGINT/SIGTERM.

    Routes and the log live in the project database (RETRAIN_APP_PG_URL under `up`, else the
    embedded server, migrated); models come from MLflow at MLFLOW_TRACKING_URI (or the local
    server's address).

    Raises:
        ValueError: a setting is invalid or the port is taken, with the reason.
    """
    import uvicorn  # imported here: the CLI's other commands never need it

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    token, max_models, max_rows = _token(), serve_max_models(), serve_max_rows()
    levels = IntervalRules.from_settings().levels  # a bad level stops the start, named
    refresh = serve_refresh_seconds()
    check_port_free(host, port)
    # MLflow's client retries an unreachable server for minutes; a request waiting on a model
    # load should hear sooner (the route stays put and the load is tried again).
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one log line a load
    url = ProjectDatabase().prepare()
    cache: ModelCache[Forecaster] = ModelCache(
        ModelLoader(MlflowRegistry(mlflow_tracking_uri())), max_models
    )

    def preload(route: Route) -> None:
        for version in route.versions():
            cache.get(route.customer, version)

    table = RouteTable()
    writer = PredictionLogWriter(url)
    predictor = Predictor(table, cache.get, writer, levels=levels)
    refresher = RouteRefresher(url, table, preload, refresh)
    history = HistoryCache(
        ParquetHistory(ParquetPartitionStore(storage_root())),
        lambda customer: countries_of(url, [customer])[customer],
        int(serve_max_history_mb() * 1024 * 1024),
    )
    watcher = PublicationWatcher(url, history, refresh)
    app = create_app(predictor, refresher, writer, token, max_rows, history, watcher)
    handlers = install_stop_handlers()
    try:
        log.info(
            "prediction service on http://%s:%d: models from %s, at most %d in memory, "
            "%d rows a request, routes read every %.1f s, histories up to %.0f MB",
            host,
            port,
            mlflow_tracking_uri(),
            max_models,
            max_rows,
            refresh,
            serve_max_history_mb(),
        )
        uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)
    except StopSignal as stop:
        log.info("stopped by %s", stop)
    finally:
        restore_handlers(handlers)
