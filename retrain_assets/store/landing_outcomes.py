"""Recording what the `sales` asset could not accept: quarantined rows and file problems.

Rows are appended with the run that saw them, never updated, so a re-materialization keeps the
history; readers take the latest run for a day.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from psycopg2.extras import Json, execute_values

from retrain_assets.features.validation import FileOutcome
from retrain_assets.store.database import transaction


def record_outcomes(url: str, day: dt.date, outcomes: Iterable[FileOutcome], run_id: str) -> None:
    """Append the quarantined rows and file problems of one day's files."""
    rows, problems = [], []
    for outcome in outcomes:
        rows += [
            (day, outcome.customer, outcome.file, q.line, q.reason, Json(q.raw), run_id)
            for q in outcome.quarantined
        ]
        problems += [
            (day, outcome.customer, outcome.file, p.severity, p.reason, run_id)
            for p in outcome.problems
        ]
    with transaction(url) as cur:
        execute_values(
            cur,
            "INSERT INTO quarantined_rows "
            "(partition_date, customer, file, line, reason, raw, run_id) VALUES %s",
            rows,
        )
        execute_values(
            cur,
            "INSERT INTO landing_file_problems "
            "(partition_date, customer, file, severity, reason, run_id) VALUES %s",
            problems,
        )


def quarantined_reasons(url: str, day: dt.date, run_id: str) -> list[tuple[str, int, str]]:
    """Return (customer, line, reason) of one run's quarantined rows for a day."""
    with transaction(url) as cur:
        cur.execute(
            "SELECT customer, line, reason FROM quarantined_rows "
            "WHERE partition_date = %s AND run_id = %s ORDER BY customer, line",
            (day, run_id),
        )
        return cur.fetchall()
