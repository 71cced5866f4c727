"""Seeded scenarios: tenants whose demand befalls events drawn from a seed (demos, benchmarks).

The three demo tenants tell one story; a benchmark that tuned its settings on them alone would
learn that story. `scenario_tenants(seed)` draws 1 to 4 other retailers (sizes, countries, noise)
and what befalls them: price changes up and down, promotion campaigns, festivals, holidays,
level shifts, trend shifts that ramp, stores and items that open or close, stock-outs and
changes of noise. `describe_scenario(seed)` names each event with its tenant and demo day (day 1
is the first day after the 120-day history), so a benchmark can count how many days a change
took to reach the served model. Settings are chosen on TUNING_SEEDS only; HELD_OUT_SEEDS are
measured as they come (BENCHMARKS.md, "Scenarios").

Only `random.Random.random()` draws the scenario (Python keeps its stream stable across
versions), so a seed names the same scenario on every machine.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal, get_args

from retrain_assets.demo.tenants import (
    DEFAULT_HISTORY_DAYS,
    DEFAULT_START,
    Lifespan,
    Regime,
    StockOut,
    TenantSpec,
)

EventKind = Literal[
    "price_up",
    "price_down",
    "promotions",
    "festival",
    "holiday",
    "level_shift",
    "trend_shift",
    "store_opens",
    "store_closes",
    "item_opens",
    "item_closes",
    "stockout",
    "noise",
]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)

TUNING_SEEDS: tuple[int, ...] = tuple(range(1, 11))
HELD_OUT_SEEDS: tuple[int, ...] = tuple(range(101, 109))

MAX_SERIES = 2_000  # per scenario: ten scenarios simulate and train in minutes
DEMO_DAYS = 60  # most events fall in the first 60 demo days (20 minutes of the live demo)
KIND_PROBABILITY = 0.35  # each tenant meets each kind of event with this chance
NOISE_LEVELS = (0.0, 0.2, 0.45, 0.8)  # low to high: a gamma multiplier's coefficient of variation
COUNTRIES = ("US", "DE", "JP", "GB", "FR", "BR", "IN", "AU", "CA", "ES", "IT", "NL")
WORDS = (
    "acorn",
    "birch",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "grove",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lotus",
    "maple",
    "nimbus",
    "orchid",
    "pebble",
)


@dataclass(frozen=True)
class ScenarioEvent:
    """One thing that befalls a tenant: its kind, its days (last None: for good) and a detail."""

    tenant: str
    kind: EventKind
    first_day: dt.date
    last_day: dt.date | None
    detail: str

    @property
    def first_demo_day(self) -> int:
        """Return the demo day the event starts (1: the day after the history; <= 0: in it)."""
        return demo_day(self.first_day)

    @property
    def last_demo_day(self) -> int | None:
        """Return the demo day the event ends on (None: for good)."""
        return None if self.last_day is None else demo_day(self.last_day)

    def line(self) -> str:
        """Return the event in words, e.g. `sc3-birch-de price_down demo day 12 ..: ...`."""
        until = "for good" if self.last_day is None else f"to day {self.last_demo_day}"
        return f"{self.tenant} {self.kind} demo day {self.first_demo_day} {until}: {self.detail}"


@dataclass(frozen=True)
class Scenario:
    """A seed's tenants and the events that befall them, earliest first."""

    seed: int
    tenants: tuple[TenantSpec, ...]
    events: tuple[ScenarioEvent, ...]


def demo_day(day: dt.date) -> int:
    """Return `day` as a demo day: 1 is the first day after the history, <= 0 is in it."""
    return (day - DEFAULT_START).days - DEFAULT_HISTORY_DAYS + 1


def demo_date(number: int) -> dt.date:
    """Return the date of demo day `number` (the inverse of `demo_day`)."""
    return DEFAULT_START + dt.timedelta(days=DEFAULT_HISTORY_DAYS + number - 1)


def scenario_tenants(seed: int) -> tuple[TenantSpec, ...]:
    """Return the tenants of scenario `seed` (the same ones on every call and machine)."""
    return scenario(seed).tenants


def describe_scenario(seed: int) -> tuple[ScenarioEvent, ...]:
    """Return every event of scenario `seed` with its tenant, kind and demo days."""
    return scenario(seed).events


def scenario_lines(seed: int) -> list[str]:
    """Return scenario `seed` in words: each tenant (size, country, noise), then each event."""
    found = scenario(seed)
    tenants = [
        f"{spec.name} ({spec.country}): {spec.stores} store(s) x {spec.items} item(s), "
        f"noise {spec.noise:g}"
        for spec in found.tenants
    ]
    return tenants + [event.line() for event in found.events]


def kinds_of(seeds: tuple[int, ...]) -> frozenset[EventKind]:
    """Return the kinds of event that some scenario of `seeds` has."""
    return frozenset(event.kind for seed in seeds for event in describe_scenario(seed))


@lru_cache(maxsize=64)
def scenario(seed: int) -> Scenario:
    """Draw scenario `seed`: 1 to 4 tenants, at most MAX_SERIES series, and their events.

    Raises:
        ValueError: `seed` is negative.
    """
    if seed < 0:
        raise ValueError(f"a scenario seed is 0 or more, not {seed}")
    draw = _Draw(random.Random(seed))
    count = draw.integer(1, 4)
    words = draw.sample(WORDS, count)
    tenants, events = [], []
    for index, word in enumerate(words):
        spec, drawn = _tenant(draw, seed, index, word, MAX_SERIES // count)
        tenants.append(spec)
        events.extend(drawn)
    events.sort(key=lambda event: (event.first_day, event.tenant))
    return Scenario(seed, tuple(tenants), tuple(events))


class _Draw:
    """Uniform, integer and choice draws made of `random()` alone (its stream is stable)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def chance(self, probability: float) -> bool:
        return self._rng.random() < probability

    def uniform(self, low: float, high: float) -> float:
        return round(low + (high - low) * self._rng.random(), 3)

    def log_uniform(self, low: float, high: float) -> float:
        return round(math.exp(math.log(low) + math.log(high / low) * self._rng.random()), 3)

    def integer(self, low: int, high: int) -> int:
        return low + min(int(self._rng.random() * (high - low + 1)), high - low)

    def sample(self, options: tuple[str, ...], count: int) -> list[str]:
        pool, chosen = list(options), []
        for _ in range(count):
            chosen.append(pool.pop(self.integer(0, len(pool) - 1)))
        return chosen

    def demo_date(self) -> dt.date:
        """Return an event's first day: mostly in the first DEMO_DAYS demo days, else history."""
        if self.chance(0.9):
            return demo_date(self.integer(1, DEMO_DAYS))
        return demo_date(self.integer(-60, 0))


def _tenant(
    draw: _Draw, seed: int, index: int, word: str, max_series: int
) -> tuple[TenantSpec, list[ScenarioEvent]]:
    """Draw one tenant's size, country and habits, then its events."""
    country = COUNTRIES[draw.integer(0, len(COUNTRIES) - 1)]
    items = draw.integer(3, 40)
    stores = min(round(draw.log_uniform(1, 50)), max(1, max_series // items))
    spec = TenantSpec(
        name=f"sc{seed}-{word}-{country.lower()}",
        country=country,
        stores=stores,
        items=items,
        seed=seed * 100 + index + 1,
        base_units=draw.log_uniform(2.0, 12.0),
        trend_per_year=draw.uniform(-0.05, 0.1),
        yearly_amplitude=draw.uniform(0.05, 0.3),
        promo_probability=draw.uniform(0.02, 0.2),
        stockout_probability=draw.uniform(0.0, 0.06),
        noise=NOISE_LEVELS[draw.integer(0, len(NOISE_LEVELS) - 1)],
    )
    regimes: list[Regime] = []
    lifespans: list[Lifespan] = []
    stockouts: list[StockOut] = []
    events: list[ScenarioEvent] = []
    for kind in EVENT_KINDS:
        if not draw.chance(KIND_PROBABILITY):
            continue
        drawn = _event(draw, spec, kind, lifespans)
        if drawn is None:
            continue
        change, first, last, detail = drawn
        if isinstance(change, Regime):
            regimes.append(change)
        elif isinstance(change, Lifespan):
            lifespans.append(change)
        else:
            stockouts.append(change)
        events.append(ScenarioEvent(spec.name, kind, first, last, detail))
    spec = replace(
        spec,
        regimes=tuple(sorted(regimes, key=lambda regime: regime.first)),
        lifespans=tuple(lifespans),
        stockouts=tuple(stockouts),
    )
    return spec, events


Change = Regime | Lifespan | StockOut


def _event(
    draw: _Draw, spec: TenantSpec, kind: EventKind, lives: list[Lifespan]
) -> tuple[Change, dt.date, dt.date | None, str] | None:
    """Draw one event of `kind` for `spec`; None when the tenant cannot have it (one store)."""
    first = draw.demo_date()
    if kind in ("price_up", "price_down"):
        price = draw.uniform(1.08, 1.3) if kind == "price_up" else draw.uniform(0.7, 0.92)
        demand = round(price ** draw.uniform(-1.8, -0.5), 3)  # shoppers answer the new price
        detail = f"prices x{price:g}, demand x{demand:g}"
        return Regime(first, None, demand, price_factor=price), first, None, detail
    if kind == "promotions":
        last = _window_end(draw, first, 14, 42) if draw.chance(0.5) else None
        often, lift = draw.uniform(0.15, 0.4), draw.uniform(1.5, 3.0)
        detail = f"{often:.0%} of items promoted, lift x{lift:g}"
        regime = Regime(first, last, 1.0, promo_lift=lift, promo_probability=often)
        return regime, first, last, detail
    if kind in ("festival", "holiday"):
        festival = kind == "festival"
        last = _window_end(draw, first, 7, 14) if festival else _window_end(draw, first, 1, 3)
        demand = draw.uniform(1.2, 1.8) if festival else draw.uniform(1.5, 2.5)
        lift = draw.uniform(2.0, 4.0) if festival else draw.uniform(1.3, 2.0)
        detail = f"demand x{demand:g}, promotion lift x{lift:g}"
        return Regime(first, last, demand, promo_lift=lift), first, last, detail
    if kind in ("level_shift", "trend_shift"):
        demand = draw.uniform(1.3, 1.9) if draw.chance(0.5) else draw.uniform(0.55, 0.8)
        ramp = draw.integer(14, 56) if kind == "trend_shift" else 0
        detail = f"demand x{demand:g}" + (f", reached over {ramp} days" if ramp else "")
        return Regime(first, None, demand, ramp_days=ramp), first, None, detail
    if kind == "noise":
        levels = [level for level in NOISE_LEVELS if level != spec.noise]
        level = levels[draw.integer(0, len(levels) - 1)]
        detail = f"noise {spec.noise:g} -> {level:g}"
        return Regime(first, None, 1.0, noise=level), first, None, detail
    if kind == "stockout":
        last = _window_end(draw, first, 3, 14)
        items = tuple(sorted({draw.integer(0, spec.items - 1) for _ in range(draw.integer(1, 3))}))
        names = ", ".join(f"I{i + 1:04d}" for i in items)
        return StockOut(first, last, items), first, last, f"{names} out of stock in every store"
    return _lifespan(draw, spec, kind, first, lives)


def _lifespan(
    draw: _Draw, spec: TenantSpec, kind: EventKind, day: dt.date, lives: list[Lifespan]
) -> tuple[Change, dt.date, dt.date | None, str] | None:
    """Draw a store or item that opens or closes on `day`; the first of each never does.

    A store or item has at most one lifespan, so the tenant always keeps one open series.
    """
    what: Literal["store", "item"] = "store" if kind.startswith("store") else "item"
    count = spec.stores if what == "store" else spec.items
    taken = {life.index for life in lives if life.what == what}
    free = [index for index in range(1, count) if index not in taken]
    if not free:
        return None
    index = free[draw.integer(0, len(free) - 1)]
    name = f"S{index + 1:03d}" if what == "store" else f"I{index + 1:04d}"
    if kind.endswith("opens"):
        return Lifespan(what, index, opens=day), day, None, f"{what} {name} opens"
    return Lifespan(what, index, closes=day), day, None, f"{what} {name} closes"


def _window_end(draw: _Draw, first: dt.date, shortest: int, longest: int) -> dt.date:
    """Return the last day of a window of `shortest` to `longest` days from `first`."""
    return first + dt.timedelta(days=draw.integer(shortest, longest) - 1)
