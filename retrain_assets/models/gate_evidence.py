"""The gate with evidence (issue 26): how sure it is, per window and store, which rule decided.

One 7-day holdout and a 2 % margin on the pooled WAPE could not tell differences of 1 - 3 %
(BENCHMARKS.md, "Hindsight"): it rejected most fresher candidates that were better. This
judges the same rows for both sides and says how sure it is:

- the holdout's newest `windows` windows of `window_days` days (rolling origins of the
  export's holdout; the candidate never trained on any of them), each judged by the one
  evidence rule (`features/evidence.py`);
- the relative change of WAPE, (candidate's absolute error - reference's) / reference's, each
  window weighted by its recency (`half_life` windows: the newest counts most, since the
  weeks after the decision are more like it than like the oldest), with a paired bootstrap
  interval (`scipy.stats.bootstrap`, paired, BCa) over store-days: a
  store's day is one unit, both sides resampled together, so a day that was hard for both
  moves neither;
- a per-store guard: how many stores got worse by more than `store_tolerance`, and by how much;
- the verdict names the rule that decided it: `evidence`, `forecasts`, `store guard` or
  `interval`.

Rules, in order: not enough evidence (a window short of rows, fewer than two stores to
resample) fails, and so do forecasts that cannot be scored; more than `max_worse_stores` of
the stores worse by more than `store_tolerance` fails; otherwise the candidate passes when the
interval's upper bound is at most `tolerance` (it is not worse by more than that, at the
interval's confidence) and its weighted change is below 0 (it is better on these rows, the
newest weeks counting most). The store guard and the WAPEs shown are unweighted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from retrain_assets.features.evidence import (
    NOT_ENOUGH,
    EvidenceRules,
    WindowRows,
    gate_windows,
    judge_window,
)
from retrain_assets.features.paired_change import paired_interval, relative_change
from retrain_assets.features.training_export import LABEL
from retrain_assets.models.scoring import InvalidForecast, wape
from retrain_assets.settings_model import FIELDS, current_settings

MIN_STORES = 2  # a bootstrap over one store's days says nothing about the others

Metadata = dict[str, float | int | str]


@dataclass(frozen=True)
class GateRules:
    """The gate's thresholds (settings RETRAIN_GATE_*; docs/configuration.md)."""

    windows: int = FIELDS["gate_windows"].default
    window_days: int = FIELDS["gate_window_days"].default
    confidence: float = FIELDS["gate_confidence"].default
    tolerance: float = FIELDS["gate_tolerance"].default
    store_tolerance: float = FIELDS["gate_store_tolerance"].default
    max_worse_stores: float = FIELDS["gate_max_worse_stores"].default
    resamples: int = FIELDS["gate_resamples"].default
    half_life: float = FIELDS["gate_half_life"].default  # windows; 0: all weigh the same

    @classmethod
    def from_settings(cls) -> GateRules:
        """Return the rules the settings hold (RETRAIN_GATE_*).

        Raises:
            SettingsError: a variable is malformed or out of range (the message names it).
        """
        windows, window_days = gate_windows()  # the policy's pre-check reads the same
        settings = current_settings()
        return cls(
            windows=windows,
            window_days=window_days,
            confidence=settings.gate_confidence,
            tolerance=settings.gate_tolerance,
            store_tolerance=settings.gate_store_tolerance,
            max_worse_stores=settings.gate_max_worse_stores,
            resamples=settings.gate_resamples,
            half_life=settings.gate_half_life,
        )

    @property
    def holdout_days(self) -> int:
        """Return the days of holdout the windows need."""
        return self.windows * self.window_days

    def window_weights(self, windows: int) -> list[float]:
        """Return each window's weight, oldest first: halved every `half_life` windows back.

        The decision is about the weeks after the holdout; a regime that ended (a festival, a
        price cut) should count less than the week just before the decision, without
        discarding the older weeks' evidence. 0: equal weights.
        """
        if self.half_life <= 0:
            return [1.0] * windows
        return [0.5 ** ((windows - 1 - k) / self.half_life) for k in range(windows)]


@dataclass(frozen=True)
class EvidenceVerdict:
    """The verdict, the rule that decided it, and every number behind it."""

    passed: bool
    rule: str  # evidence, forecasts, store guard, interval
    reason: str
    candidate_wape: float
    reference_wape: float
    metadata: Metadata


def judge_with_evidence(
    holdout: pd.DataFrame,
    candidate: np.ndarray,
    reference: np.ndarray,
    reference_label: str,
    rules: GateRules,
    evidence_rules: EvidenceRules,
    train_by_store: dict[str, int],
    customer: str,
    train_last_days: Mapping[str, dt.date] | None = None,
) -> EvidenceVerdict:
    """Judge the candidate's and the reference's forecasts of the holdout's rows.

    `holdout`: rows with `date`, `store_id` and the label; `candidate` and `reference`: one
    forecast a row; `train_by_store`: the training part's rows per store (which stores the
    model serves, for the per-window evidence); `train_last_days`: each store's newest day
    with rows in the training part (with the holdout's, which stores stopped selling and are
    not asked for rows; None: unknown, every store is asked).
    """
    actual = holdout[LABEL].to_numpy(dtype=float)
    days = pd.to_datetime(holdout["date"]).dt.date.to_numpy()
    stores = holdout["store_id"].astype(str).to_numpy()
    windows, shortfall = _windows(
        days, stores, rules, evidence_rules, train_by_store, customer, train_last_days
    )
    try:
        reference_wape = wape(actual, reference)
        candidate_wape = wape(actual, candidate)
    except InvalidForecast as err:
        return _verdict(False, "forecasts", f"forecasts cannot be scored: {err}", {})
    base: Metadata = {"candidate_wape": candidate_wape, "reference_wape": reference_wape}
    if shortfall:
        return _verdict(False, "evidence", shortfall, base)
    inside = np.isin(days, np.asarray([d for w in windows for d in w]))
    actual, candidate, reference = actual[inside], candidate[inside], reference[inside]
    days, stores = days[inside], stores[inside]
    per_window = _per_window(windows, days, actual, candidate, reference)
    guard = _store_guard(stores, actual, candidate, reference, rules)
    weights = rules.window_weights(len(windows))
    units = _units(days, stores, actual, candidate, reference, _day_weights(windows, weights))
    n_stores = len(set(stores))
    shown: Metadata = {
        **base,
        "reference": reference_label,
        "windows": " | ".join(per_window),
        "window_days": rules.window_days,
        "rows_scored": len(actual),
        "store_days": len(units),
        "window_weights": ", ".join(f"{w:.3g}" for w in weights),
        "half_life_windows": rules.half_life,
        "stores_worse": f"{guard[0]} of {n_stores} by more than {rules.store_tolerance:.0%}",
        "store_changes": guard[1],
    }
    few = too_few_stores(n_stores, len(units))
    if few:
        return _verdict(False, "evidence", few, shown)
    change = relative_change(units)
    bounds = _interval(units, rules)
    if bounds is None:
        why = (
            f"{NOT_ENOUGH}: no bootstrap interval over {len(units)} store-days (the reference's "
            "absolute error sums to 0 in some resamples)"
        )
        return _verdict(False, "evidence", why, shown)
    low, high, method = bounds
    shown |= {
        "wape_change": change,
        "interval_low": low,
        "interval_high": high,
        "interval_method": method,
        "confidence": rules.confidence,
        "tolerance": rules.tolerance,
    }
    weighted = (
        ""
        if len(set(weights)) == 1
        else f"recency-weighted (half-life {rules.half_life:g} window(s)) "
    )
    interval = (
        f"WAPE {candidate_wape:.4f} vs {reference_label} {reference_wape:.4f}, {weighted}change "
        f"{change:+.1%} ({rules.confidence:.0%} interval {low:+.1%} .. {high:+.1%}, paired "
        f"bootstrap over {len(units)} store-days, {len(actual)} rows, {len(windows)} "
        f"window(s) of {rules.window_days} days)"
    )
    if guard[0] > rules.max_worse_stores * n_stores:
        why = (
            f"store guard: {guard[0]} of {n_stores} stores worse by more than "
            f"{rules.store_tolerance:.0%} (allowed {rules.max_worse_stores:.0%} of them: "
            f"{guard[1]}); {interval}"
        )
        return _verdict(False, "store guard", why, shown)
    passed = high <= rules.tolerance and change < 0
    if passed:
        why = f"interval: better, and not worse by more than {rules.tolerance:.0%}: {interval}"
    elif change >= 0:
        why = f"interval: not better on these rows: {interval}"
    else:
        why = (
            f"interval: could be worse by more than {rules.tolerance:.0%} (upper bound "
            f"{high:+.1%}): {interval}"
        )
    return _verdict(passed, "interval", why, shown)


def too_few_stores(n_stores: int, store_days: int) -> str:
    """Return the shortfall of a holdout with fewer stores than a bootstrap needs ("" if none)."""
    if n_stores >= MIN_STORES:
        return ""
    return (
        f"{NOT_ENOUGH}: the holdout has {n_stores} store(s) with rows; a bootstrap over "
        f"one store's {store_days} days cannot speak for a customer (needs >= {MIN_STORES})"
    )


def holdout_shortfall(
    holdout: pd.DataFrame,
    rules: GateRules,
    evidence_rules: EvidenceRules,
    train_by_store: dict[str, int],
    customer: str,
    train_last_days: Mapping[str, dt.date] | None = None,
) -> str:
    """Return why this gate could not judge the holdout's rows, "" when it could.

    The gate's own evidence checks, the ones made before any forecast (each window's rows, the
    stores a bootstrap needs): `training_job` asks them before a GPU job is spent, so a window
    this gate would answer "not enough evidence" is refused there, by the same code.
    `holdout`: rows with `date` and `store_id`.
    """
    days = pd.to_datetime(holdout["date"]).dt.date.to_numpy()
    stores = holdout["store_id"].astype(str).to_numpy()
    windows, shortfall = _windows(
        days, stores, rules, evidence_rules, train_by_store, customer, train_last_days
    )
    if shortfall:
        return shortfall
    inside = np.isin(days, np.asarray([d for w in windows for d in w]))
    store_days = set(zip(days[inside], stores[inside], strict=True))
    return too_few_stores(len(set(stores[inside])), len(store_days))


def _verdict(passed: bool, rule: str, reason: str, shown: Metadata) -> EvidenceVerdict:
    metadata: Metadata = {**shown, "rule": rule, "reason": reason}
    return EvidenceVerdict(
        passed,
        rule,
        reason,
        float(shown.get("candidate_wape", float("nan"))),
        float(shown.get("reference_wape", float("nan"))),
        metadata,
    )


def _windows(
    days: np.ndarray,
    stores: np.ndarray,
    rules: GateRules,
    evidence_rules: EvidenceRules,
    train_by_store: dict[str, int],
    customer: str,
    train_last_days: Mapping[str, dt.date] | None = None,
) -> tuple[list[list[dt.date]], str]:
    """Return the windows' days, newest last, and the shortfall of the first short one ("").

    A store's newest day is its newest in the training part or the holdout, so a store that
    stopped selling (features/evidence.py) is not asked for rows in any window.
    """
    if len(days) == 0:
        return [], f"{NOT_ENOUGH}: the holdout has no rows of {customer}"
    last = max(days)
    one = dt.timedelta(days=1)
    windows = []
    for k in reversed(range(rules.windows)):
        end = last - k * rules.window_days * one
        windows.append([end - i * one for i in reversed(range(rules.window_days))])
    first = windows[0][0]
    newest = _newest_days(days, stores, train_last_days)
    if min(days) > first:
        return windows, (
            f"{NOT_ENOUGH}: the holdout {min(days)} .. {last} is shorter than "
            f"{rules.windows} window(s) of {rules.window_days} days (from {first})"
        )
    for n, window in enumerate(windows, start=1):
        inside = np.isin(days, np.asarray(window))
        counts = pd.Series(stores[inside]).value_counts()
        rows = WindowRows(
            customer,
            window[0] - one,  # the training part ends before the window: it is not judged here
            window[0],
            window[-1],
            train_by_store,
            {str(s): int(c) for s, c in counts.items()},
            max(days),
            newest,
        )
        judged = judge_window(rows, evidence_rules)
        if not judged.enough:
            return windows, f"window {n} of {len(windows)}: {judged.reason}"
    return windows, ""


def _newest_days(
    days: np.ndarray, stores: np.ndarray, train_last_days: Mapping[str, dt.date] | None
) -> dict[str, dt.date]:
    """Return each store's newest day with rows: the holdout's, else the training part's."""
    newest = dict(train_last_days or {})
    in_holdout = pd.Series(days).groupby(stores).max()
    newest.update({str(store): day for store, day in in_holdout.items()})
    return newest


def _per_window(
    windows: list[list[dt.date]],
    days: np.ndarray,
    actual: np.ndarray,
    candidate: np.ndarray,
    reference: np.ndarray,
) -> list[str]:
    shown = []
    for window in windows:
        inside = np.isin(days, np.asarray(window))
        total = np.abs(actual[inside]).sum()
        if total == 0:
            shown.append(f"{window[0]} .. {window[-1]}: actuals sum to 0")
            continue
        c = np.abs(actual[inside] - candidate[inside]).sum() / total
        r = np.abs(actual[inside] - reference[inside]).sum() / total
        shown.append(f"{window[0]} .. {window[-1]}: {c:.4f} vs {r:.4f}")
    return shown


def _store_guard(
    stores: np.ndarray,
    actual: np.ndarray,
    candidate: np.ndarray,
    reference: np.ndarray,
    rules: GateRules,
) -> tuple[int, str]:
    """Return how many stores got worse by more than the tolerance, and each store's change."""
    frame = pd.DataFrame(
        {
            "store": stores,
            "c": np.abs(actual - candidate),
            "r": np.abs(actual - reference),
        }
    )
    sums = frame.groupby("store", sort=True)[["c", "r"]].sum()
    change = (sums["c"] - sums["r"]) / sums["r"].where(sums["r"] > 0)
    worse = int((change > rules.store_tolerance).sum())
    listed = ", ".join(f"{s} {v:+.1%}" for s, v in change.sort_values(ascending=False).items())
    return worse, listed


def _day_weights(windows: list[list[dt.date]], weights: list[float]) -> dict[dt.date, float]:
    return {day: w for window, w in zip(windows, weights, strict=True) for day in window}


def _units(
    days: np.ndarray,
    stores: np.ndarray,
    actual: np.ndarray,
    candidate: np.ndarray,
    reference: np.ndarray,
    day_weights: dict[dt.date, float],
) -> np.ndarray:
    """Return one row per store-day: [candidate's absolute error, reference's] summed, weighted.

    Both sides of a store-day get its window's weight, so the pair stays a pair and the
    bootstrap's statistic is the weighted WAPE change.
    """
    weight = np.asarray([day_weights[d] for d in days], dtype=float)
    frame = pd.DataFrame(
        {
            "day": days,
            "store": stores,
            "c": np.abs(actual - candidate) * weight,
            "r": np.abs(actual - reference) * weight,
        }
    )
    return frame.groupby(["store", "day"], sort=True)[["c", "r"]].sum().to_numpy(dtype=float)


def _interval(units: np.ndarray, rules: GateRules) -> tuple[float, float, str] | None:
    """Return the paired bootstrap interval of the relative change and its method.

    A reference whose error sums to 0 gives no spread to resample: the change itself.
    """
    if units[:, 1].sum() <= 0:
        change = relative_change(units)
        return change, change, "none (no spread)"
    return paired_interval(units, rules.confidence, rules.resamples)
