"""The data side's daily partitions: one per finished day, from the first day of history."""

from __future__ import annotations

import dagster as dg

FIRST_DAY = "2025-01-01"
DAILY = dg.DailyPartitionsDefinition(start_date=FIRST_DAY)
