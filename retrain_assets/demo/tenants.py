"""The demo tenants: three retailers of different countries and sizes, and what befalls them.

The live demo keeps landing days after the first 120, and each tenant's change of regime comes
within its first simulated weeks, so a newcomer sees every outcome within ten minutes (20 s a
day): northwind-us cuts its prices for good on the first simulated day and sells more (its
first model never saw that: a challenger trained on the new prices passes its gate and its
canary, and is promoted); lindenhof-de's demand and prices shift for good a week in (the drift
rule raises an alert a person approves); sakura-jp has a festival of a week and a half in which
a promotion sells four times as much (a challenger trained during it passes its gate on
festival days, then over-forecasts promoted items in its canary once the festival is over, and
is rolled back). The offsets were chosen by training the platform's own LightGBM settings on
the simulated days offline; the 120 days of history carry no regime.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

DEFAULT_START = dt.date(2026, 1, 1)
DEFAULT_HISTORY_DAYS = 120
NORMAL_PROMO_LIFT = 1.15


@dataclass(frozen=True)
class Regime:
    """A change to a tenant's demand and prices from `first` to `last` (None: for good).

    The fields after `promo_lift` default to "no change", so a regime written before them
    simulates the same days: `ramp_days` turns a step into a trend shift (the demand factor
    grows linearly from 1 on `first` to `demand_factor` `ramp_days` days later, then holds),
    `promo_probability` changes how often an item is promoted, `noise` the day-to-day noise.
    """

    first: dt.date
    last: dt.date | None
    demand_factor: float
    price_factor: float = 1.0
    promo_lift: float | None = None  # a promotion's lift inside the regime (normally 1.15)
    ramp_days: int = 0
    promo_probability: float | None = None
    noise: float | None = None

    def applies(self, day: dt.date) -> bool:
        """Return True when `day` falls inside the regime."""
        return self.first <= day and (self.last is None or day <= self.last)

    def demand_on(self, day: dt.date) -> float:
        """Return the demand factor of `day` inside the regime: the ramp's share of it, if any."""
        if self.ramp_days <= 0:
            return self.demand_factor
        share = min(1.0, ((day - self.first).days + 1) / self.ramp_days)
        return 1.0 + (self.demand_factor - 1.0) * share


@dataclass(frozen=True)
class Lifespan:
    """When one store's or one item's series exist: no row before `opens` or from `closes` on.

    `index` counts from 0 (store S001 and item I0001 are index 0); None leaves that end open.
    """

    what: Literal["store", "item"]
    index: int
    opens: dt.date | None = None
    closes: dt.date | None = None

    def open_on(self, day: dt.date) -> bool:
        """Return True when the store or item sells on `day`."""
        return (self.opens is None or self.opens <= day) and (
            self.closes is None or day < self.closes
        )


@dataclass(frozen=True)
class StockOut:
    """Items with no stock from `first` to `last`: they sell nothing (a supplier's outage).

    `items` and `stores` count from 0; no stores means every store.
    """

    first: dt.date
    last: dt.date
    items: tuple[int, ...]
    stores: tuple[int, ...] = ()

    def applies(self, day: dt.date) -> bool:
        """Return True when `day` falls inside the outage."""
        return self.first <= day <= self.last


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
    regimes: tuple[Regime, ...] = ()
    noise: float = 0.0  # extra day-to-day noise: a gamma multiplier's coefficient of variation
    lifespans: tuple[Lifespan, ...] = ()
    stockouts: tuple[StockOut, ...] = ()

    def factors(self, day: dt.date) -> tuple[float, float, float]:
        """Return the (demand, price, promotion lift) of `day`, regimes applied."""
        demand, price, lift = 1.0, 1.0, NORMAL_PROMO_LIFT
        for regime in self.regimes:
            if regime.applies(day):
                demand, price = demand * regime.demand_on(day), price * regime.price_factor
                lift = regime.promo_lift or lift
        return demand, price, lift

    def promo_probability_on(self, day: dt.date) -> float:
        """Return how often an item is promoted on `day` (the newest regime that sets it wins)."""
        probability = self.promo_probability
        for regime in self.regimes:
            if regime.applies(day) and regime.promo_probability is not None:
                probability = regime.promo_probability
        return probability

    def noise_on(self, day: dt.date) -> float:
        """Return the noise level of `day` (the newest regime that sets it wins)."""
        noise = self.noise
        for regime in self.regimes:
            if regime.applies(day) and regime.noise is not None:
                noise = regime.noise
        return noise


def _day(offset: int) -> dt.date:
    return DEFAULT_START + dt.timedelta(days=offset)


DEMO_TENANTS: tuple[TenantSpec, ...] = (
    TenantSpec(
        "northwind-us",
        "US",
        stores=8,
        items=30,
        seed=11,
        base_units=8.0,
        regimes=(Regime(_day(DEFAULT_HISTORY_DAYS), None, 1.3, price_factor=0.85),),
    ),
    TenantSpec(
        "lindenhof-de",
        "DE",
        stores=5,
        items=20,
        seed=23,
        trend_per_year=0.02,
        regimes=(Regime(_day(DEFAULT_HISTORY_DAYS + 6), None, 1.8, price_factor=1.15),),
    ),
    TenantSpec(
        "sakura-jp",
        "JP",
        stores=3,
        items=15,
        seed=37,
        base_units=4.0,
        promo_probability=0.2,
        regimes=(
            Regime(
                _day(DEFAULT_HISTORY_DAYS + 1), _day(DEFAULT_HISTORY_DAYS + 13), 1.5, promo_lift=4.0
            ),
        ),
    ),
)
