"""The demo tenants: three retailers of different countries and sizes."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class TenantSpec:
    """One simulated retailer: where it is, how big it is and how its demand behaves."""

    name: str
    country: str
    stores: int
    items: int
    seed: int
    base_units: float = 6.0
    trend_per_year: float = 0.05
    yearly_amplitude: float = 0.15
    promo_probability: float = 0.06
    stockout_probability: float = 0.03


DEMO_TENANTS: tuple[TenantSpec, ...] = (
    TenantSpec("northwind-us", "US", stores=8, items=30, seed=11, base_units=8.0),
    TenantSpec("lindenhof-de", "DE", stores=5, items=20, seed=23, trend_per_year=0.02),
    TenantSpec("sakura-jp", "JP", stores=3, items=15, seed=37, base_units=4.0),
)

DEFAULT_START = dt.date(2026, 1, 1)
DEFAULT_HISTORY_DAYS = 120
