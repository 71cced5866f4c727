"""The prediction log writer: every prediction becomes a row of `prediction_log`, durably.

Group commit: a request hands its rows to the writer and waits; one writer thread takes
whatever has queued up (many requests' rows), inserts it with one COPY, commits, and only then
releases the waiting requests. A response therefore means its rows are committed: a crash
(even SIGKILL) after the response loses none of them, and the table gets one statement per
batch, never one insert per request. On shutdown the writer refuses new rows, drains the
queue and commits it before the process exits.

A batch that fails is retried on a new connection a few times; if it still fails, its
requests are told (`LogUnavailable`) and answer 503 without acknowledging anything. A commit
lost in flight (the connection dropped during COMMIT) may have been applied: the retry can
then log those rows twice, never zero times.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import math
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg2
import psycopg2.extensions

from retrain_assets.store.server import libpq_url

log = logging.getLogger(__name__)

MAX_BATCH_ROWS = 50_000
_NEEDS_ESCAPE = re.compile(r"[\\\t\n\r]")
RETRY_DELAYS = (0.2, 1.0, 3.0)
_COLUMNS = (
    "customer, model_version, alias, served, request_key, store_id, item_id, forecast_date, "
    "prediction, error, rollout_id, step, served_at, intervals"
)
_STOP = object()


class LogUnavailable(Exception):
    """The rows could not be committed (or the writer is shutting down); nothing was logged."""


class LogRow(NamedTuple):
    """One prediction (or failed prediction) as `prediction_log` stores it.

    A named tuple, not a dataclass: a request of 1,000 rows makes up to 2,000 of them.
    """

    customer: str
    model_version: str
    alias: str
    served: bool
    request_key: str
    store_id: str
    item_id: str
    forecast_date: dt.date
    prediction: float | None
    error: str | None
    rollout_id: int | None
    step: str | None
    served_at: dt.datetime
    intervals: str | None = None  # JSON: {"80": [lower, upper], ...}; None: no bounds


def _text(value: str | None) -> str:
    r"""Return a text field for COPY's text format (\N is NULL; backslash escapes)."""
    if value is None:
        return r"\N"
    if not _NEEDS_ESCAPE.search(value):
        return value
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


def _number(value: float | None) -> str:
    """Return a double precision field; NaN and infinities are kept as Postgres spells them."""
    if value is None:
        return r"\N"
    if math.isfinite(value):
        return repr(float(value))
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def copy_lines(rows: Sequence[LogRow]) -> str:
    """Return `rows` as COPY text-format lines, in `_COLUMNS` order."""
    out = []
    memo: dict[object, str] = {}  # customer, version, alias, step, day, time: a few values

    def once(value: object, render: Callable[[Any], str]) -> str:
        text = memo.get(value)
        if text is None:
            text = memo[value] = render(value)
        return text

    for row in rows:
        rollout = r"\N" if row.rollout_id is None else str(int(row.rollout_id))
        out.append(
            f"{once(row.customer, _text)}\t{once(row.model_version, _text)}\t"
            f"{once(row.alias, _text)}\t{'t' if row.served else 'f'}\t"
            f"{_text(row.request_key)}\t{_text(row.store_id)}\t{_text(row.item_id)}\t"
            f"{once(row.forecast_date, dt.date.isoformat)}\t{_number(row.prediction)}\t"
            f"{_text(row.error)}\t{rollout}\t{once(row.step, _text)}\t"
            f"{once(row.served_at, dt.datetime.isoformat)}\t{_text(row.intervals)}\n"
        )
    return "".join(out)


@dataclass
class _Batch:
    rows: Sequence[LogRow]
    done: Future[None]


class PredictionLogWriter:
    """One thread that commits queued prediction rows in batches (group commit)."""

    def __init__(
        self,
        url: str,
        max_batch_rows: int = MAX_BATCH_ROWS,
        retry_delays: tuple[float, ...] = RETRY_DELAYS,
    ) -> None:
        """Write to `prediction_log` in the database at `url`.

        A failed batch is tried again after each of `retry_delays` (seconds) before its
        requests are told it failed.
        """
        self.url = url
        self.max_batch_rows = max_batch_rows
        self.retry_delays = retry_delays
        self.received_rows = 0
        self.committed_rows = 0
        self.committed_requests = 0
        self.batches = 0
        self.last_error: str | None = None
        self._queue: queue.Queue[_Batch | object] = queue.Queue()
        self._gate = threading.Lock()
        self._closing = False
        self._conn: psycopg2.extensions.connection | None = None
        self._thread = threading.Thread(target=self._run, name="prediction-log", daemon=True)

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def alive(self) -> bool:
        """Return whether the writer thread is running and accepting rows."""
        return self._thread.is_alive() and not self._closing

    def write(self, rows: Sequence[LogRow], timeout: float = 60.0) -> None:
        """Queue `rows` and return once they are committed.

        Raises:
            LogUnavailable: the writer is shutting down, the batch failed, or no commit came
                within `timeout` seconds (the rows may still be committed later, but this
                caller must not acknowledge them).
        """
        if not rows:
            return
        batch = _Batch(rows, Future())
        with self._gate:
            if self._closing:
                raise LogUnavailable("the service is shutting down")
            self._queue.put(batch)
            self.received_rows += len(rows)
        try:
            batch.done.result(timeout)
        except FutureTimeout:
            raise LogUnavailable(f"no commit within {timeout:.0f} s") from None

    def close(self, timeout: float = 60.0) -> None:
        """Refuse new rows, commit everything queued, and stop the thread."""
        with self._gate:
            if not self._closing:
                self._closing = True
                self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("the prediction log writer did not drain within %.0f s", timeout)

    # -- the thread -----------------------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        try:
            while not stopping:
                batches, stopping = self._next_batches()
                if not batches:
                    continue
                try:
                    self._commit(batches)
                except Exception as error:  # a bug, not Postgres: fail the batch, keep writing
                    log.exception("prediction log batch failed")
                    for batch in batches:
                        if not batch.done.done():
                            batch.done.set_exception(LogUnavailable(f"log writer error: {error}"))
        finally:
            if self._conn is not None:
                self._conn.close()
            log.info(
                "prediction log writer stopped after %d row(s) in %d batch(es) of %d request(s)",
                self.committed_rows,
                self.batches,
                self.committed_requests,
            )

    def _next_batches(self) -> tuple[list[_Batch], bool]:
        """Wait for queued rows, then take whatever else is queued, up to max_batch_rows."""
        first = self._queue.get()
        if not isinstance(first, _Batch):  # _STOP
            return [], True
        batches = [first]
        size = len(first.rows)
        while size < self.max_batch_rows:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if not isinstance(item, _Batch):  # _STOP
                return batches, True  # _STOP is put last: nothing can follow it
            batches.append(item)
            size += len(item.rows)
        return batches, False

    def _commit(self, batches: list[_Batch]) -> None:
        rows = [row for batch in batches for row in batch.rows]
        payload = copy_lines(rows)
        failure: Exception | None = None
        for delay in (0.0, *self.retry_delays):
            if delay:
                time.sleep(delay)
            try:
                self._copy(payload)
            except psycopg2.Error as error:
                failure = error
                self.last_error = str(error).strip() or type(error).__name__
                log.warning("prediction log batch of %d row(s) failed: %s", len(rows), error)
                self._drop_connection()
                continue
            self.committed_rows += len(rows)
            self.committed_requests += len(batches)
            self.batches += 1
            self.last_error = None
            for batch in batches:
                batch.done.set_result(None)
            return
        reason = f"the prediction log is unavailable: {failure}".strip()
        for batch in batches:
            batch.done.set_exception(LogUnavailable(reason))

    def _copy(self, payload: str) -> None:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg2.connect(libpq_url(self.url), connect_timeout=5)
        with self._conn, self._conn.cursor() as cur:  # commits, or rolls back on error
            cur.copy_expert(f"COPY prediction_log ({_COLUMNS}) FROM STDIN", io.StringIO(payload))

    def _drop_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None
