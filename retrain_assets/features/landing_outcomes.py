"""Recording what the `sales` asset could not accept: quarantined rows and file problems.

Rows are appended with the run that saw them, never updated, so a re-materialization keeps the
history; readers take the latest run for a day.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from psycopg2.extras import Json, execute_values

from retrain_assets.features.validation import FileOutcome
from retrain_assets.store.database import transaction

ESCAPED_KEY = "unicode_escaped"


def _escaped(text: str) -> str:
    return text.encode("unicode_escape").decode("ascii")


def storable_raw(raw: dict[str, str]) -> Mapping[str, object]:
    """Return a quarantined row's fields in a form a jsonb column can hold, losing nothing.

    jsonb cannot hold the NUL character, which is itself a reason to quarantine a row. A row
    with a NUL in any name or value is stored as `{"unicode_escaped": {name: value}}`, every
    name and value in Python's `unicode_escape` form (read back with
    `.encode("ascii").decode("unicode_escape")`); the values of other rows are always text, so
    the two shapes cannot be confused. Other rows are stored as they are.
    """
    if any("\x00" in name or "\x00" in value for name, value in raw.items()):
        return {ESCAPED_KEY: {_escaped(name): _escaped(value) for name, value in raw.items()}}
    return raw


def record_outcomes(url: str, day: dt.date, outcomes: Iterable[FileOutcome], run_id: str) -> None:
    """Append the quarantined rows and file problems of one day's files."""
    record_outcome_days(url, {day: outcomes}, run_id)


def record_outcome_days(
    url: str, outcomes_by_day: Mapping[dt.date, Iterable[FileOutcome]], run_id: str
) -> None:
    """Append the quarantined rows and file problems of several days' files, in one transaction.

    A single-run backfill over a year records its days in one connection, not one per day.
    """
    rows: list[tuple[object, ...]] = []
    problems: list[tuple[object, ...]] = []
    for day, outcomes in outcomes_by_day.items():
        _collect(day, outcomes, run_id, rows, problems)
    with transaction(url) as cur:
        execute_values(
            cur,
            "INSERT INTO quarantined_rows "
            "(partition_date, customer, file, line, reason, raw, run_id) VALUES %s",
            rows,
            page_size=1000,
        )
        execute_values(
            cur,
            "INSERT INTO landing_file_problems "
            "(partition_date, customer, file, severity, reason, run_id) VALUES %s",
            problems,
            page_size=1000,
        )


def _collect(
    day: dt.date,
    outcomes: Iterable[FileOutcome],
    run_id: str,
    rows: list[tuple[object, ...]],
    problems: list[tuple[object, ...]],
) -> None:
    """Add one day's quarantine records and file problems to the rows to insert."""
    for outcome in outcomes:
        rows += [
            (
                day,
                outcome.customer,
                outcome.file,
                q.line,
                q.reason,
                Json(storable_raw(q.raw)),
                run_id,
            )
            for q in outcome.quarantined
        ]
        problems += [
            (day, outcome.customer, outcome.file, p.severity, p.reason, run_id)
            for p in outcome.problems
        ]


def quarantined_reasons(url: str, day: dt.date, run_id: str) -> list[tuple[str, int, str]]:
    """Return (customer, line, reason) of one run's quarantined rows for a day."""
    with transaction(url) as cur:
        cur.execute(
            "SELECT customer, line, reason FROM quarantined_rows "
            "WHERE partition_date = %s AND run_id = %s ORDER BY customer, line",
            (day, run_id),
        )
        return cur.fetchall()
