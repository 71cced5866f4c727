"""What a tick observes about every canary step it analyses, read once for all of them.

Two grouped queries on `prediction_log` (the step's canary counts; the canary/shadow pairs of
the rollouts so far) and one read of each needed `store_day_features` day for the actual
sales, however many customers are rolling out. A canary row and the champion's shadow row of
the same request key are one pair; each request key counts once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from retrain_assets.asset_keys import STORE_DAY_FEATURES, name_of
from retrain_assets.deployment.analysis import StepObservation
from retrain_assets.deployment.canary_evidence import PAIR_COLUMNS
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.training_export import LABEL
from retrain_assets.store.database import transaction

FEATURES = name_of(STORE_DAY_FEATURES)
_NONFINITE = "('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)"


@dataclass(frozen=True)
class DueStep:
    """A rollout whose current canary step is due for analysis."""

    rollout_id: int
    customer: str
    step: str


def observe(
    url: str,
    due: Sequence[DueStep],
    features: ParquetPartitionStore,
    published: Collection[dt.date],
    min_predictions: int = 1,
    rows_per_day: Mapping[str, float] | None = None,
    keep_pairs: bool = False,
) -> dict[int, StepObservation]:
    """Return each due rollout's observation of its current step.

    Quality (pairs, actuals, WAPE) is only read for steps that already have `min_predictions`
    canary predictions: the others wait for data whatever their actuals say, and a tick of
    thousands of steps still short of predictions costs one grouped count.

    Args:
        url: the project database (prediction_log).
        due: the steps to observe.
        features: where the materialized `store_day_features` days are.
        published: the days of `store_day_features` that are materialized (actuals known).
        min_predictions: canary predictions a step needs before its quality is read.
        rows_per_day: each customer's rows with actuals a day (the evidence rule's volume).
        keep_pairs: keep each rollout's rows with actuals in its observation (the evidence
            rule resamples them).
    """
    if not due:
        return {}
    counts = step_counts(url, due)
    judged = {d.rollout_id for d in due if counts.get(d.rollout_id, (0,))[0] >= min_predictions}
    pairs = canary_pairs(url, sorted(judged), published) if judged else canary_pairs_frame([])
    actuals = read_actuals(features, sorted(set(pairs["forecast_date"])))
    joined = join_actuals(pairs, actuals)
    scores = score_joined(joined)
    covered = (
        coverage_of(join_actuals(canary_bounds(url, sorted(judged), published), actuals))
        if judged
        else {}
    )
    kept = (
        {int(str(k)): v for k, v in joined.groupby("rollout_id")}
        if keep_pairs and not joined.empty
        else {}
    )
    volume = rows_per_day or {}
    found = {}
    for step in due:
        found[step.rollout_id] = step_observation(
            step,
            counts.get(step.rollout_id, (0, 0, 0)),
            scores.get(step.rollout_id, (0, None, None)),
            min_predictions,
            _pairs(kept, step.rollout_id) if keep_pairs else None,
            float(volume.get(step.customer, 0.0)),
            covered.get(step.rollout_id),
        )
    return found


Scored = tuple[int, float | None, float | None]  # rows with actuals, canary WAPE, champion WAPE


def step_observation(
    step: DueStep,
    counts: tuple[int, int, int],
    scored: Scored,
    min_predictions: int,
    pairs: pd.DataFrame | None = None,
    rows_per_day: float = 0.0,
    coverage: Mapping[str, float] | None = None,
) -> StepObservation:
    """Return one step's observation from its counts and its pairs' scores (`score_joined`).

    `counts`: the step's canary predictions, errors and non-finite ones. Quality is read only
    once the step has `min_predictions` predictions; before that the rows count as unread.
    Pure, so the decision benchmark observes a step as the controller does.
    """
    requests, errors, nonfinite = counts
    read = requests >= min_predictions
    rows, canary, champion = scored if read else (0, None, None)
    if pairs is not None and not read:
        pairs = pd.DataFrame(columns=PAIR_COLUMNS)
    return StepObservation(
        step=step.step,
        canary_requests=requests,
        canary_errors=errors,
        canary_nonfinite=nonfinite,
        rows_with_actuals=rows,
        canary_wape=canary,
        champion_wape=champion,
        quality_read=read,
        pairs=pairs,
        rows_per_day=rows_per_day,
        canary_coverage=coverage,
    )


def step_counts(url: str, due: Sequence[DueStep]) -> dict[int, tuple[int, int, int]]:
    """Return rollout id -> (canary predictions, errors, non-finite) in its current step."""
    with transaction(url) as cur:
        cur.execute(
            f"""
            SELECT p.rollout_id, count(*), count(p.error),
                count(*) FILTER (WHERE p.error IS NULL
                    AND (p.prediction IS NULL OR p.prediction IN {_NONFINITE}))
            FROM prediction_log p
            JOIN unnest(%s::bigint[], %s::text[]) AS d(rollout_id, step)
                ON p.rollout_id = d.rollout_id AND p.step = d.step
            WHERE p.alias = 'canary' AND p.served
            GROUP BY p.rollout_id
            """,
            ([d.rollout_id for d in due], [d.step for d in due]),
        )
        return {int(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in cur.fetchall()}


def canary_pairs(
    url: str, rollout_ids: Sequence[int], published: Collection[dt.date]
) -> pd.DataFrame:
    """Return one row per canary-routed request key with both forecasts, on published days.

    Columns: rollout_id, customer, store_id, item_id, forecast_date (date), canary, champion.
    A key requested more than once counts once, with the mean of each side's predictions.
    Failed and non-finite predictions are left out (the operational check counts them).
    """
    with transaction(url) as cur:
        cur.execute(
            f"""
            SELECT rollout_id, min(customer), min(store_id), min(item_id), forecast_date,
                avg(prediction) FILTER (WHERE alias = 'canary'),
                avg(prediction) FILTER (WHERE alias = 'champion')
            FROM prediction_log
            WHERE rollout_id = ANY(%s) AND (alias = 'canary') = served
                AND error IS NULL AND prediction IS NOT NULL
                AND prediction NOT IN {_NONFINITE} AND forecast_date = ANY(%s::date[])
            GROUP BY rollout_id, request_key, forecast_date
            HAVING count(*) FILTER (WHERE alias = 'canary') > 0
                AND count(*) FILTER (WHERE alias = 'champion') > 0
            """,
            (list(rollout_ids), sorted(published)),
        )
        rows = cur.fetchall()
    return canary_pairs_frame(rows)


def canary_bounds(
    url: str, rollout_ids: Sequence[int], published: Collection[dt.date]
) -> pd.DataFrame:
    """Return each canary-served request key's logged bounds, on published days.

    Columns: rollout_id, customer, store_id, item_id, forecast_date, bounds (`{"80": [lower,
    upper], ...}`, as the service logged them). Rows without bounds are left out; a key asked
    more than once counts once (its latest row).
    """
    with transaction(url) as cur:
        cur.execute(
            """
            SELECT DISTINCT ON (rollout_id, request_key, forecast_date) rollout_id, customer,
                store_id, item_id, forecast_date, intervals
            FROM prediction_log
            WHERE rollout_id = ANY(%s) AND alias = 'canary' AND served
                AND intervals IS NOT NULL AND forecast_date = ANY(%s::date[])
            ORDER BY rollout_id, request_key, forecast_date, id DESC
            """,
            (list(rollout_ids), sorted(published)),
        )
        rows = cur.fetchall()
    columns = ["rollout_id", "customer", "store_id", "item_id", "forecast_date", "bounds"]
    return pd.DataFrame(rows, columns=columns)


def coverage_of(joined: pd.DataFrame) -> dict[int, dict[str, float]]:
    """Return rollout id -> the share of actuals inside each level's bounds, and "rows"."""
    found: dict[int, dict[str, float]] = {}
    for rollout_id, part in joined.groupby("rollout_id"):
        inside: dict[str, list[bool]] = {}
        for bounds, actual in zip(part["bounds"], part["actual"].astype(float), strict=True):
            for level, (lower, upper) in bounds.items():
                inside.setdefault(level, []).append(lower <= actual <= upper)
        found[int(str(rollout_id))] = {
            **{level: round(sum(hits) / len(hits), 4) for level, hits in inside.items()},
            "rows": float(len(part)),
        }
    return found


def canary_pairs_frame(rows: list[tuple]) -> pd.DataFrame:
    """Return pairs rows as the frame `score_pairs` reads."""
    columns = [
        "rollout_id",
        "customer",
        "store_id",
        "item_id",
        "forecast_date",
        "canary",
        "champion",
    ]
    return pd.DataFrame(rows, columns=columns)


def read_actuals(features: ParquetPartitionStore, days: Sequence[dt.date]) -> pd.DataFrame:
    """Return (customer, store_id, item_id, forecast_date, actual) of each day, read once each."""
    frames = []
    for day in days:
        path = features.path(FEATURES, day.isoformat())
        with path.open("rb") as handle:
            frame = pd.read_parquet(handle, columns=["customer", "store_id", "item_id", LABEL])
        frames.append(frame.assign(forecast_date=day).rename(columns={LABEL: "actual"}))
    if not frames:
        return pd.DataFrame(columns=["customer", "store_id", "item_id", "forecast_date", "actual"])
    return pd.concat(frames, ignore_index=True)


def _pairs(kept: Mapping[int, pd.DataFrame], rollout_id: int) -> pd.DataFrame:
    """Return a rollout's rows with actuals as the evidence rule reads them (maybe none)."""
    found = kept.get(rollout_id)
    if found is None:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    return found[PAIR_COLUMNS].reset_index(drop=True)


def join_actuals(pairs: pd.DataFrame, actuals: pd.DataFrame) -> pd.DataFrame:
    """Return the pairs whose actual sales are known, with column `actual`."""
    if pairs.empty or actuals.empty:
        return pairs.assign(actual=pd.Series(dtype=float)).iloc[0:0]
    keys = ["customer", "store_id", "item_id", "forecast_date"]
    return pairs.merge(actuals.dropna(subset=["actual"]), on=keys, how="inner")


def score_pairs(
    pairs: pd.DataFrame, actuals: pd.DataFrame
) -> dict[int, tuple[int, float | None, float | None]]:
    """Return rollout id -> (rows with actuals, canary WAPE, champion WAPE) on the same rows."""
    return score_joined(join_actuals(pairs, actuals))


def score_joined(joined: pd.DataFrame) -> dict[int, tuple[int, float | None, float | None]]:
    """Return `score_pairs`'s answer for pairs already joined with their actuals."""
    if joined.empty:
        return {}
    actual = joined["actual"].to_numpy(dtype=float)
    joined = joined.assign(
        scale=np.abs(actual),
        canary_error=np.abs(actual - joined["canary"].to_numpy(dtype=float)),
        champion_error=np.abs(actual - joined["champion"].to_numpy(dtype=float)),
    )
    sums = joined.groupby("rollout_id").agg(
        rows=("scale", "size"),
        scale=("scale", "sum"),
        canary=("canary_error", "sum"),
        champion=("champion_error", "sum"),
    )
    found: dict[int, tuple[int, float | None, float | None]] = {}
    for rollout_id, rows, scale, canary, champion in zip(
        sums.index, sums["rows"], sums["scale"], sums["canary"], sums["champion"], strict=True
    ):
        if scale > 0:
            found[int(rollout_id)] = (int(rows), float(canary / scale), float(champion / scale))
        else:  # actual sales sum to zero: WAPE is undefined, so there is nothing to judge yet
            found[int(rollout_id)] = (int(rows), None, None)
    return found
