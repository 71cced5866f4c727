"""Deterministic retail demand: what lands in the landing zone for each customer and day.

A day's file is a pure function of the tenant and the date, so landing the same day twice
writes the same bytes, and "the next N days" is new data arriving over time.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from upath import UPath

from retrain_assets.demo.tenants import DEFAULT_HISTORY_DAYS, DEFAULT_START, TenantSpec
from retrain_assets.features.calendar import is_holiday
from retrain_assets.landing import LANDING_COLUMNS, write_manifest

_EPOCH = dt.date(2024, 1, 1)


@dataclass(frozen=True)
class _SeriesParams:
    store_ids: np.ndarray
    item_ids: np.ndarray
    stores: np.ndarray  # each series' store index (0 is S001)
    items: np.ndarray  # each series' item index (0 is I0001)
    level: np.ndarray
    regular_price: np.ndarray
    elasticity: np.ndarray
    weekly: np.ndarray


@lru_cache(maxsize=512)
def _series_params(spec: TenantSpec) -> _SeriesParams:
    rng = np.random.default_rng([spec.seed, 0])
    store_factor = rng.uniform(0.6, 1.5, spec.stores)
    item_level = rng.lognormal(mean=0.0, sigma=0.6, size=spec.items) * spec.base_units
    item_price = np.round(rng.uniform(1.5, 25.0, spec.items), 2)
    item_elasticity = rng.uniform(-2.0, -0.6, spec.items)
    weekly = np.array([0.85, 0.8, 0.85, 0.95, 1.1, 1.35, 1.1])  # Monday .. Sunday
    store_grid, item_grid = np.meshgrid(
        np.arange(spec.stores), np.arange(spec.items), indexing="ij"
    )
    stores, items = store_grid.ravel(), item_grid.ravel()
    return _SeriesParams(
        store_ids=np.array([f"S{s + 1:03d}" for s in stores]),
        item_ids=np.array([f"I{i + 1:04d}" for i in items]),
        stores=stores,
        items=items,
        level=store_factor[stores] * item_level[items],
        regular_price=item_price[items],
        elasticity=item_elasticity[items],
        weekly=weekly,
    )


def _day_of_year(day: dt.date) -> int:
    return day.timetuple().tm_yday


def simulate_day(spec: TenantSpec, day: dt.date) -> pd.DataFrame:
    """Return one tenant's sales file for one day, with the landing columns."""
    params = _series_params(spec)
    rng = np.random.default_rng([spec.seed, day.toordinal()])
    n = len(params.level)
    years = (day - _EPOCH).days / 365.25
    seasonal = (
        params.weekly[day.weekday()]
        * (1.0 + spec.yearly_amplitude * np.sin(2 * np.pi * (_day_of_year(day) - 80) / 365.25))
        * (1.0 + spec.trend_per_year) ** years
    )
    if is_holiday(spec.country, day):
        seasonal *= 1.5
    elif is_holiday(spec.country, day + dt.timedelta(days=1)):
        seasonal *= 1.2
    demand_factor, price_factor, lift = spec.factors(day)
    seasonal *= demand_factor
    on_promo = rng.random(n) < spec.promo_probability_on(day)
    regular_price = params.regular_price * price_factor
    price = np.round(regular_price * np.where(on_promo, 0.8, 1.0), 2)
    relative_price = price / regular_price
    promo_lift = np.where(on_promo, lift, 1.0)
    mean = params.level * seasonal * relative_price**params.elasticity * promo_lift
    demand = rng.poisson(_noisy(spec, day, mean))
    opening_stock = rng.poisson(mean * 2.5 + 3)  # stocked for the expected demand
    stockout = rng.random(n) < spec.stockout_probability
    opening_stock = np.where(stockout, rng.integers(0, np.maximum(mean, 1) + 1), opening_stock)
    opening_stock = _outages(spec, day, params, opening_stock)
    units_sold = np.minimum(demand, opening_stock)  # a stock-out censors sales
    frame = pd.DataFrame(
        {
            "date": day.isoformat(),
            "store_id": params.store_ids,
            "item_id": params.item_ids,
            "units_sold": units_sold,
            "price": price,
            "on_promo": on_promo.astype(int),
            "stock_on_hand": opening_stock - units_sold,
        },
        columns=LANDING_COLUMNS,
    )
    return _open_series(spec, day, params, frame)


def _noisy(spec: TenantSpec, day: dt.date, mean: np.ndarray) -> np.ndarray:
    """Return `mean` times a gamma noise of the day's level (its own stream: no level, no draw)."""
    noise = spec.noise_on(day)
    if noise <= 0:
        return mean
    shape = 1.0 / noise**2
    rng = np.random.default_rng([spec.seed, day.toordinal(), 1])
    return mean * rng.gamma(shape, 1.0 / shape, len(mean))


def _outages(
    spec: TenantSpec, day: dt.date, params: _SeriesParams, stock: np.ndarray
) -> np.ndarray:
    """Return `stock` with nothing on hand for the series an outage covers on `day`."""
    for outage in spec.stockouts:
        if outage.applies(day):
            hit = np.isin(params.items, outage.items)
            if outage.stores:
                hit &= np.isin(params.stores, outage.stores)
            stock = np.where(hit, 0, stock)
    return stock


def _open_series(
    spec: TenantSpec, day: dt.date, params: _SeriesParams, frame: pd.DataFrame
) -> pd.DataFrame:
    """Return `frame` without the rows of stores or items that are not open on `day`."""
    if not spec.lifespans:
        return frame
    keep = np.ones(len(frame), dtype=bool)
    for life in spec.lifespans:
        if not life.open_on(day):
            index = params.stores if life.what == "store" else params.items
            keep &= index != life.index
    return frame[keep].reset_index(drop=True)


def simulated_sales(spec: TenantSpec, days: list[dt.date]) -> pd.DataFrame:
    """Return the tenant's sales of `days` as the `sales` asset holds them (customer column, types).

    One place for the offline users of the simulator (the hindsight benchmarks, the demo's
    forecast requests, the serving tests), so they read the same rows the platform would.
    """
    frames = []
    for day in days:
        frame = simulate_day(spec, day)
        frame.insert(0, "customer", spec.name)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True).astype(
        {"date": "datetime64[ns]", "on_promo": bool, "store_id": str, "item_id": str}
    )


def landed_days(landing_root: str, customer: str) -> list[dt.date]:
    """Return the days that have a file in a customer's landing folder, oldest first."""
    folder = UPath(landing_root) / customer
    if not folder.exists():
        return []
    days = []
    for path in folder.iterdir():
        if path.name.endswith(".csv"):
            try:
                days.append(dt.date.fromisoformat(path.name.removesuffix(".csv")))
            except ValueError:
                continue  # not a daily file; the sales asset reports files it expects, not extras
    return sorted(days)


def days_to_land(
    already: list[dt.date], days: int | None, start: dt.date | None, latest_allowed: dt.date
) -> list[dt.date]:
    """Decide which days to land next for one tenant.

    A tenant with no history gets `days` (default 120) days from `start` (default 2026-01-01);
    one with history gets the `days` days after its last file.

    Raises:
        ValueError: a day would fall after `latest_allowed` (daily partitions exist only for
            finished days), or `start` is given for a tenant that already has history.
    """
    if already:
        if start is not None and start != already[-1] + dt.timedelta(days=1):
            raise ValueError(
                f"--start {start} conflicts with the history already landed through {already[-1]}"
            )
        first, count = already[-1] + dt.timedelta(days=1), days or 0
    else:
        first, count = start or DEFAULT_START, DEFAULT_HISTORY_DAYS if days is None else days
    planned = [first + dt.timedelta(days=i) for i in range(count)]
    if planned and planned[-1] > latest_allowed:
        raise ValueError(
            f"landing {count} day(s) from {first} would reach {planned[-1]}, after "
            f"{latest_allowed}: daily partitions exist only for finished days"
        )
    return planned


def land_tenant(landing_root: str, spec: TenantSpec, days: list[dt.date]) -> int:
    """Write one tenant's manifest and daily files; return the number of files written."""
    write_manifest(landing_root, spec.name, spec.country)
    folder = UPath(landing_root) / spec.name
    for day in days:
        with (folder / f"{day.isoformat()}.csv").open("w") as handle:
            simulate_day(spec, day).to_csv(handle, index=False)
    return len(days)
