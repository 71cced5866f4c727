"""Reading one customer's landing file for one day, turning any failure into a recorded outcome.

One customer's missing or unreadable file must never stop the others, so nothing here raises
for bad data: a missing file or an I/O error becomes a file problem (and `validate_file`
makes one of a file that is not UTF-8 text).
"""

from __future__ import annotations

import datetime as dt

from retrain_assets.features.validation import FileOutcome, failed_file, validate_file
from retrain_assets.landing import day_file


def read_landing_day(landing_root: str, customer: str, day: dt.date) -> FileOutcome:
    """Return what became of `customer`'s file for `day`: accepted, quarantined, problems."""
    path = day_file(landing_root, customer, day)
    name = f"{customer}/{path.name}"
    try:
        if not path.exists():
            return failed_file(customer, name, f"file missing: {path}")
        # Passed on, not kept: validation lets go of the bytes once it has cut them into rows.
        return validate_file(path.read_bytes(), customer, day, name)
    except OSError as err:  # validation does no I/O: this is reading the file
        return failed_file(customer, name, f"unreadable: {err}")
