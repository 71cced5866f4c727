"""Days of the policy's tests, counted from DAY0 (so a test reads `day(7)`, not a date)."""

from __future__ import annotations

import datetime as dt

DAY0 = dt.date(2026, 1, 1)


def day(n: int) -> dt.date:
    """Return the n-th day after DAY0."""
    return DAY0 + dt.timedelta(days=n)
