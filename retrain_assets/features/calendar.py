"""Public holidays of a customer's country, shared by the simulator and the features."""

from __future__ import annotations

import datetime as dt
from functools import lru_cache

import holidays


@lru_cache(maxsize=256)
def holiday_dates(country: str, year: int) -> frozenset[dt.date]:
    """Return the public holidays of `country` (ISO 3166 alpha-2) in `year`.

    Raises:
        ValueError: the `holidays` package does not know the country code.
    """
    try:
        calendar = holidays.country_holidays(country.upper(), years=year)
    except NotImplementedError as err:
        raise ValueError(f"unknown holiday country code {country!r}") from err
    return frozenset(calendar.keys())


def is_holiday(country: str | None, day: dt.date) -> bool:
    """Return True when `day` is a public holiday in `country` (False when it is unknown)."""
    return country is not None and day in holiday_dates(country, day.year)
