"""Hindsight benchmark (issue 26): were the gate's verdicts and the canaries' outcomes right?

Replays the demo's tenants offline, with the project's own code and no platform: the simulator
(`demo/simulate.py`, `demo/tenants.py`), the features (`features/feature_math.py`, written as
one Parquet file a day as `store_day_features` publishes them), the retraining policy's rule
(`policy/rule.py`'s `policy_outcome` with the demo's settings, drift measured by
`policy/drift.py`), the export (`features/training_export.py`), the GPU service's LightGBM
training (`gpu/service/trainer.py`), the gate (`models/gate.py`'s `judge_candidate`, with
`features/evidence.py`'s rule), the deploy-time check (the same function on the newest days),
and the canary's analysis (`deployment/analysis.py`'s `judge_step` on pairs scored by
`deployment/observations.py`'s `score_pairs`, rows routed by `serving/routing.py`), with the
demo's rollout settings (`runtime/demo_mode.py`: steps of two demo days, 10 predictions and
10 rows with actuals). `--canary evidence` (RETRAIN_CANARY_RULE) judges the canary by
`deployment/canary_evidence.py` instead: the same pairs resampled, the rows a step needs from
the tenant's published rows a day, an inconclusive analysis restarting the step's two days.

Each decision is then judged in hindsight (docs/decisions.md, "Right in hindsight"): the
candidate and the model it would replace (the gate's reference; the champion for a canary)
both forecast every row of the tenant's next 28 days after the decision, and the one with the
lower WAPE was the better choice.

The cadence, simplified but faithful: one step per demo day. Day d is published, then the
canary in progress (if any) is analysed with the rows served on days up to d, then the policy
decides; a decision's training, gate, registration and deploy-time check finish within the
day (the demo's GPU jobs take seconds), and an auto-deployed canary serves from day d + 1.
The schedule rule counts wall-clock days (20 s a demo day), so it never fires in a demo;
volume does (northwind-us every 7 days, sakura-jp every 4). lindenhof-de's drift alert waits
for a person, as in the demo; `--approve-drift` approves each alert at once instead. A passing
candidate is deployed only when no rollout is in progress (as `auto_deploy` does), and a canary
step's analysis runs once a day (the demo's 5 s ticks see one new day of rows each 20 s).

    .venv/bin/python benchmarks/bench_hindsight.py
    .venv/bin/python benchmarks/bench_hindsight.py --days 218 --json /tmp/hindsight.json
    RETRAIN_GATE_WINDOWS=4 .venv/bin/python benchmarks/bench_hindsight.py --gate evidence \
        --canary evidence
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from upath import UPath

from retrain_assets.asset_keys import STORE_DAY_FEATURES, name_of
from retrain_assets.demo.feature_history import tenant_features
from retrain_assets.demo.tenants import (
    DEFAULT_HISTORY_DAYS,
    DEFAULT_START,
    DEMO_TENANTS,
    TenantSpec,
)
from retrain_assets.deployment.analysis import StepObservation, judge_step
from retrain_assets.deployment.canary_evidence import PAIR_COLUMNS, daily_rows
from retrain_assets.deployment.observations import score_pairs
from retrain_assets.deployment.rollout_settings import (
    RolloutSettings,
    rollout_settings,
    step_name,
)
from retrain_assets.features.evidence import (
    EVIDENCE_COLUMNS,
    HOLDOUT_DAYS,
    Evidence,
    EvidenceRules,
    judge_parts,
)
from retrain_assets.features.feature_math import FEATURE_VERSION
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.training_export import LABEL, MODEL_FEATURES, export_customer
from retrain_assets.gpu.service.schemas import TrainingSpec
from retrain_assets.gpu.service.trainer import train
from retrain_assets.models.gate import (
    SEASONAL_NAIVE,
    Predict,
    ReferenceModel,
    judge_candidate,
    lightgbm_predictor,
)
from retrain_assets.models.gate_evidence import GateRules, judge_with_evidence
from retrain_assets.models.scoring import Verdict, seasonal_naive
from retrain_assets.policy.decisions import Decision
from retrain_assets.policy.drift import DayFrames, measure_drift
from retrain_assets.policy.history import Published, choose_window
from retrain_assets.policy.rule import policy_outcome
from retrain_assets.policy.thresholds import DEFAULTS, PolicySettings, validate
from retrain_assets.runtime.demo_mode import DEMO_ENVIRONMENT, DEMO_POLICY, demo_day_seconds
from retrain_assets.serving.routing import canary_mask, request_key
from retrain_assets.settings import gate_margin
from retrain_assets.store.snapshots import SnapshotRecord

HINDSIGHT_DAYS = 28
EQUIVALENT = 0.01  # within 1 % WAPE of each other over the 28 days, either decision is right
DEMO_DAYS = 218  # issue 26's run: `make up` on a fresh clone to yesterday
FEATURES = name_of(STORE_DAY_FEATURES)
HISTORY_END = DEFAULT_START + dt.timedelta(days=DEFAULT_HISTORY_DAYS - 1)  # demo day 0


Gate = Callable[..., tuple[Verdict, dict[str, Any]]]  # (replay, tenant, holdout, candidate,
# reference, evidence) -> the verdict and the check's metadata; None: the current gate


@dataclass(frozen=True)
class Model:
    """A model as the replay knows it: a name, how it forecasts, the day it was decided on."""

    name: str
    predict: Predict
    decided: dt.date | None = None  # None: seasonal naive

    def reference(self) -> ReferenceModel | None:
        """Return the gate's view of it (None: seasonal naive, the gate's last resort)."""
        if self.decided is None:
            return None
        return ReferenceModel(self.name, self.predict, "champion", self.name)


NAIVE = Model(SEASONAL_NAIVE, seasonal_naive)


@dataclass
class Judged:
    """One decision and its hindsight: the candidate and what it would replace, next 28 days."""

    tenant: str
    kind: str  # "gate" or "canary"
    day: dt.date  # the decision's day (the last day with actuals it saw)
    candidate: str
    replaced: str
    passed: bool  # gate: passed; canary: promoted
    reason: str
    candidate_wape: float = float("nan")  # hindsight, next 28 days, all rows
    replaced_wape: float = float("nan")
    extra_units: float = 0.0  # sum|error| of the candidate minus that of the replaced model
    first_deployment: bool = False
    deployed: bool = False  # gate only: a canary (or a first promotion) followed
    rows_decided_on: int = 0  # canary only: rows with actuals at the deciding analysis
    rule: str = ""  # canary only: the rule that decided (analysis.StepVerdict.rule)
    canary_days: int = 0  # canary only: demo days from its deployment to its outcome
    inconclusive: int = 0  # canary only: its inconclusive analyses (each extended a step)
    band: float = EQUIVALENT
    metadata: dict[str, Any] = field(default_factory=dict)  # the gate's, as its check shows it

    @property
    def equivalent(self) -> bool:
        """Return whether neither model was better by more than the band: any verdict is right."""
        return abs(self.relative) <= self.band

    @property
    def better(self) -> bool:
        """Return whether the candidate forecast the next 28 days better (lower WAPE)."""
        return self.candidate_wape < self.replaced_wape

    @property
    def right(self) -> bool:
        """Return whether the decision was right in hindsight (docs/decisions.md)."""
        return self.equivalent or self.passed == self.better

    @property
    def relative(self) -> float:
        """Return how much worse (+) or better (-) the candidate was, relative."""
        return self.candidate_wape / self.replaced_wape - 1.0


@dataclass
class Rollout:
    """A canary in progress: the step, its days, the rows served so far and their forecasts."""

    candidate: Model
    champion: Model
    gate: Judged
    weights: tuple[float, ...]
    step: int
    step_first_day: dt.date
    step_requests: int = 0
    waited: int = 0
    pairs: list[pd.DataFrame] = field(default_factory=list)
    timer_first_day: dt.date | None = None  # the step's wait restarted by an inconclusive one
    inconclusive: int = 0  # inconclusive analyses of the step (the evidence rule)
    inconclusive_total: int = 0  # of the rollout


@dataclass
class TenantState:
    """What the registry and the policy hold for one tenant during the replay."""

    spec: TenantSpec
    settings: PolicySettings
    champion: Model | None = None
    challenger: Model | None = None
    last: Decision | None = None
    alert: bool = False
    rollout: Rollout | None = None
    versions: int = 0
    judged: list[Judged] = field(default_factory=list)
    models: dict[str, Model] = field(default_factory=lambda: {NAIVE.name: NAIVE})
    served: dict[dt.date, str] = field(default_factory=dict)  # the champion of each demo day


class Replay:
    """The demo's tenants, day by day, with the project's own decisions."""

    def __init__(
        self,
        root: Path,
        days: int,
        approve_drift: bool,
        gate: Gate | None = None,
        holdout_days: int = HOLDOUT_DAYS,
        refit: bool = False,
        say: Callable[[str], None] = print,
    ) -> None:
        """Simulate every tenant's sales and features through `days` + 28 demo days."""
        self.root, self.days, self.approve_drift, self.say = root, days, approve_drift, say
        self.store = ParquetPartitionStore(str(root / "features"))
        self.settings = rollout_settings()
        self.day_seconds = demo_day_seconds() or 20.0
        self.margin = gate_margin()
        self.rules = EvidenceRules.from_settings()
        self.gate = gate
        self.holdout_days = HOLDOUT_DAYS if gate is None else max(HOLDOUT_DAYS, holdout_days)
        self.refit = refit and self.holdout_days > HOLDOUT_DAYS
        last = HISTORY_END + dt.timedelta(days=days + HINDSIGHT_DAYS)
        self.features = {spec.name: tenant_features(spec, last) for spec in DEMO_TENANTS}
        self.by_day = {
            name: dict(iter(frame.groupby(frame["date"].dt.date)))
            for name, frame in self.features.items()
        }
        self.published: Published = {}
        self.frames = DayFrames(self.store)
        self.decision_ids = iter(range(1, 1_000_000))
        self.started = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        self.tenants = [
            TenantState(
                spec, validate(dataclasses.replace(DEFAULTS, **demo_policy(spec)), spec.name)
            )
            for spec in DEMO_TENANTS
        ]

    def run(self) -> list[Judged]:
        """Replay history and demo days 0 .. `days`; return every decision, judged."""
        for offset in range(DEFAULT_HISTORY_DAYS - 1):
            self.publish(DEFAULT_START + dt.timedelta(days=offset))
        for k in range(self.days + 1):
            day = HISTORY_END + dt.timedelta(days=k)
            for tenant in self.tenants:
                self.serve(tenant, day)
                if tenant.champion is not None:
                    tenant.served[day] = tenant.champion.name
            self.publish(day)
            for tenant in self.tenants:
                self.analyse(tenant, day)
                self.decide(tenant, day, k)
        judged = [j for t in self.tenants for j in t.judged]
        for j in judged:
            self.hindsight(j)
        return judged

    def served_error(self) -> dict[str, tuple[float, float]]:
        """Return per tenant (and "total") the champions' sum |error| and sum |actual|.

        What the tenant was served, every row of every demo day with a champion: the outcome
        the decisions are for (a gate that waits longer for evidence serves staler models).
        The canary's share of the traffic is left out.
        """
        found = {}
        for tenant in self.tenants:
            frame = self.features[tenant.spec.name]
            days = pd.Series(tenant.served)
            error = volume = 0.0
            for name, group in days.groupby(days):
                rows = frame[frame["date"].isin(pd.to_datetime(list(group.index)))]
                actual = rows[LABEL].to_numpy(dtype=float)
                error += float(np.abs(actual - tenant.models[name].predict(rows)).sum())
                volume += float(np.abs(actual).sum())
            found[tenant.spec.name] = (error, volume)
        found["total"] = (
            sum(e for e, _ in found.values()),
            sum(v for _, v in found.values()),
        )
        return found

    def publish(self, day: dt.date) -> None:
        """Write the day's features (every tenant, one file) and record the snapshot."""
        rows = [self.by_day[t.spec.name].get(day) for t in self.tenants]
        frame = pd.concat([r for r in rows if r is not None], ignore_index=True)
        self.store.write(FEATURES, day.isoformat(), frame)
        self.published[day] = SnapshotRecord(
            day,
            f"v-{day}",
            FEATURE_VERSION,
            {t.spec.name: len(r) for t, r in zip(self.tenants, rows, strict=True) if r is not None},
            False,
            None,
            "replay",
        )

    # -- the canary -------------------------------------------------------------------------

    def serve(self, tenant: TenantState, day: dt.date) -> None:
        """Forecast the tenant's rows of `day` (before it lands): the canary's share logged."""
        rollout = tenant.rollout
        if rollout is None or day < rollout.step_first_day:
            return
        rows = self.by_day[tenant.spec.name][day]
        keys = [
            request_key(s, i, day) for s, i in zip(rows["store_id"], rows["item_id"], strict=True)
        ]
        mask = canary_mask(tenant.spec.name, keys, rollout.weights[rollout.step])
        routed = rows[mask]
        rollout.step_requests += len(routed)
        if routed.empty:  # no row of the day went to the canary
            return
        rollout.pairs.append(
            pd.DataFrame(
                {
                    "rollout_id": 1,
                    "customer": tenant.spec.name,
                    "store_id": routed["store_id"].to_numpy(),
                    "item_id": routed["item_id"].to_numpy(),
                    "forecast_date": day,
                    "canary": rollout.candidate.predict(routed),
                    "champion": rollout.champion.predict(routed),
                    "actual": routed[LABEL].to_numpy(dtype=float),
                }
            )
        )

    def analyse(self, tenant: TenantState, day: dt.date) -> None:
        """Analyse the canary step once its two demo days have passed, as the controller does."""
        rollout = tenant.rollout
        if rollout is None or day < rollout.step_first_day:
            return
        timer = rollout.timer_first_day or rollout.step_first_day
        elapsed = ((day - timer).days + 1) * self.day_seconds
        if elapsed < self.settings.step_seconds:
            return
        pairs = pd.concat(rollout.pairs, ignore_index=True)
        scores = score_pairs(
            pairs.drop(columns="actual"), pairs.drop(columns=["canary", "champion", "rollout_id"])
        )
        rows, canary, champion = scores.get(1, (0, None, None))
        weight = rollout.weights[rollout.step]
        name = step_name(weight)
        seen = StepObservation(
            step=name,
            canary_requests=rollout.step_requests,
            rows_with_actuals=rows,
            canary_wape=canary,
            champion_wape=champion,
            pairs=pairs[PAIR_COLUMNS],  # every served day is published by now: all have actuals
            rows_per_day=daily_rows(self.published, [tenant.spec.name])[tenant.spec.name],
        )
        verdict = judge_step(
            seen, self.settings, rollout.waited, weight=weight, inconclusive=rollout.inconclusive
        )
        if verdict.kind == "wait":  # the controller's ticks of one demo day, all short of data
            rollout.waited += max(1, round(self.day_seconds / self.settings.interval_seconds))
            return
        if verdict.kind == "inconclusive":  # the step runs another minimum time
            rollout.inconclusive += 1
            rollout.inconclusive_total += 1
            rollout.timer_first_day = day + dt.timedelta(days=1)
            self.say(f"  {day} {tenant.spec.name:13} canary {name} {verdict.reason[:150]}")
            return
        if verdict.kind == "pass" and rollout.step + 1 < len(rollout.weights):
            rollout.step += 1
            rollout.step_first_day = day + dt.timedelta(days=1)
            rollout.step_requests = rollout.waited = rollout.inconclusive = 0
            rollout.timer_first_day = None
            return
        promoted = verdict.kind == "pass"
        tenant.judged.append(
            Judged(
                tenant.spec.name,
                "canary",
                day,
                rollout.candidate.name,
                rollout.champion.name,
                promoted,
                f"{name}: {verdict.reason}",
                rows_decided_on=rows,
                rule=verdict.rule,
                canary_days=(day - rollout.gate.day).days,
                inconclusive=rollout.inconclusive_total,
            )
        )
        if promoted:
            tenant.champion = rollout.candidate
        tenant.rollout = None
        outcome = "promoted" if promoted else "rolled back"
        self.say(f"  {day} {tenant.spec.name:13} canary {outcome}: {name}: {verdict.reason}")

    # -- the policy, the training and the gate ----------------------------------------------

    def decide(self, tenant: TenantState, day: dt.date, k: int) -> None:
        """Run the policy's rule; on a decision, train, gate, register and maybe deploy."""
        now = self.started + dt.timedelta(seconds=k * self.day_seconds)
        outcome = policy_outcome(
            tenant.spec.name,
            tenant.settings,
            self.published,
            tenant.last,
            None,  # a pending alert only changes the reason of a skip
            None,  # busy: a training ends within its demo day here
            now,
            self.drift_of,
            rules=self.rules,
        )
        if outcome.action == "alert":
            if not self.approve_drift:
                if not tenant.alert:
                    why = outcome.reason[:90]
                    self.say(f"  {day} {tenant.spec.name:13} drift alert waits for a person: {why}")
                tenant.alert = True
                return
            outcome = dataclasses.replace(outcome, action="decide", policy="drift")
        if outcome.action != "decide":
            return
        tenant.alert = False
        window = choose_window(self.published, tenant.settings.window_days)
        tenant.last = Decision(
            next(self.decision_ids),
            tenant.spec.name,
            str(outcome.policy),
            outcome.reason,
            window.first_day,
            window.last_day,
            window.data_versions,
            "replay",
            {},
            now,
            None,
        )
        self.train_and_gate(tenant, day, tenant.last)

    def drift_of(self, last: Decision, recent: list[dt.date]) -> Any:
        """Measure drift as the policy's evaluation does (statistics from the feature files)."""
        window = sorted(dt.date.fromisoformat(d) for d in last.data_versions)
        baseline = self.frames.stats(last.customer, window)
        return measure_drift(baseline, last.customer, recent, self.frames)

    def train_and_gate(self, tenant: TenantState, day: dt.date, decision: Decision) -> None:
        """Export, train as the GPU service does, gate, register; deploy when nothing rolls out."""
        name = tenant.spec.name
        ref = decision.snapshot
        days = pd.to_datetime(sorted(ref.data_versions))
        frame = self.features[name]
        frame = frame[frame["date"].isin(days)]
        folder = self.root / "exports" / name / str(decision.id)
        export = export_customer(self.store, name, ref, self.holdout_days, UPath(folder), frame)
        train_part = pd.read_parquet(export.train_path, columns=EVIDENCE_COLUMNS)
        holdout = pd.read_parquet(export.holdout_path)
        evidence = judge_parts(name, train_part, holdout, self.rules)
        result = train(
            TrainingSpec(customer=name, dataset_url=export.train_path, features=MODEL_FEATURES),
            folder / "job",
        )
        tenant.versions += 1
        gated = Model(
            f"v{tenant.versions} ({day})", lightgbm_predictor(str(result.model_path)), day
        )
        candidate = self.refitted(gated, name, ref, frame, folder) if self.refit else gated
        tenant.models[candidate.name] = candidate
        reference = tenant.champion or tenant.challenger or NAIVE
        if self.gate is None:
            outcome = judge_candidate(
                holdout, gated.predict, reference.reference(), self.margin, evidence=evidence
            )
            verdict, shown = outcome.verdict, dict(outcome.metadata)
        else:
            verdict, shown = self.gate(self, tenant, holdout, gated, reference, evidence)
        gate = Judged(
            name, "gate", day, candidate.name, reference.name, verdict.passed, verdict.reason
        )
        gate.metadata = shown
        tenant.judged.append(gate)
        busy = tenant.rollout is not None
        self.say(
            f"  {day} {name:13} {decision.policy:8} {candidate.name:18} gate "
            f"{'PASS' if verdict.passed else 'fail'} vs {reference.name}: {verdict.reason[:110]}"
            + (
                " (registered; a rollout is in progress: not deployed)"
                if verdict.passed and busy
                else ""
            )
        )
        if not verdict.passed:
            return
        tenant.challenger = candidate
        if busy:
            return
        newest = holdout[holdout["date"] > holdout["date"].max() - pd.Timedelta(days=7)]
        check = judge_candidate(
            newest,  # the 7 newest days with actuals: none after the holdout yet (same day)
            candidate.predict,
            tenant.champion.reference() if tenant.champion else None,
            self.settings.deploy_margin,
        ).verdict
        if not check.passed:
            self.say(f"  {day} {name:13} deploy-time check failed: {check.reason[:110]}")
            return
        gate.deployed = True
        if tenant.champion is None:
            gate.first_deployment = True
            tenant.champion = candidate
            return
        tenant.rollout = Rollout(
            candidate,
            tenant.champion,
            gate,
            self.settings.step_weights,
            0,
            day + dt.timedelta(days=1),
        )

    def refitted(
        self, gated: Model, name: str, ref: Any, frame: pd.DataFrame, folder: Path
    ) -> Model:
        """Return the model deployed after a gate on a longer holdout: the same training on
        the window up to its last 7 days (`--refit`, a what-if: a second GPU job)."""
        export = export_customer(
            self.store, name, ref, HOLDOUT_DAYS, UPath(folder / "refit"), frame
        )
        result = train(
            TrainingSpec(customer=name, dataset_url=export.train_path, features=MODEL_FEATURES),
            folder / "refit-job",
        )
        return Model(
            f"{gated.name} refit", lightgbm_predictor(str(result.model_path)), gated.decided
        )

    # -- hindsight ------------------------------------------------------------------------

    def hindsight(self, judged: Judged) -> None:
        """Score the candidate and what it would replace on the next 28 days, every row."""
        models = next(t for t in self.tenants if t.spec.name == judged.tenant).models
        frame = self.features[judged.tenant]
        first = pd.Timestamp(judged.day + dt.timedelta(days=1))
        last = pd.Timestamp(judged.day + dt.timedelta(days=HINDSIGHT_DAYS))
        rows = frame[(frame["date"] >= first) & (frame["date"] <= last)]
        actual = rows[LABEL].to_numpy(dtype=float)
        errors = {
            side: np.abs(actual - models[model].predict(rows))
            for side, model in (("candidate", judged.candidate), ("replaced", judged.replaced))
        }
        volume = np.abs(actual).sum()
        judged.candidate_wape = float(errors["candidate"].sum() / volume)
        judged.replaced_wape = float(errors["replaced"].sum() / volume)
        judged.extra_units = float(errors["candidate"].sum() - errors["replaced"].sum())


def evidence_gate(rules: GateRules) -> Gate:
    """Return the gate with evidence as the replay calls a gate."""

    def gate(
        replay: Replay,
        tenant: TenantState,
        holdout: pd.DataFrame,
        candidate: Model,
        reference: Model,
        evidence: Evidence,
    ) -> tuple[Verdict, dict[str, Any]]:
        if not evidence.enough:
            verdict = Verdict(False, math.nan, math.nan, reference.name, 0.0, evidence.reason)
            return verdict, {"rule": "evidence", "reason": evidence.reason}
        judged = judge_with_evidence(
            holdout,
            candidate.predict(holdout),
            reference.predict(holdout),
            reference.name,
            rules,
            replay.rules,
            dict(evidence.rows.train_by_store),
            tenant.spec.name,
        )
        verdict = Verdict(
            judged.passed,
            judged.candidate_wape,
            judged.reference_wape,
            reference.name,
            rules.tolerance,
            judged.reason,
        )
        return verdict, dict(judged.metadata)

    return gate


def demo_policy(spec: TenantSpec) -> dict[str, Any]:
    """Return the tenant's demo policy overrides, typed as the settings' fields are."""
    overrides = DEMO_POLICY.get(spec.name, {})
    return {k: type(getattr(DEFAULTS, k))(v) for k, v in overrides.items()}


# -- the report ------------------------------------------------------------------------------


@dataclass
class Tally:
    """Right and wrong decisions of one tenant (or all), and what the wrong ones cost."""

    gate_pass_right: int = 0
    gate_pass_wrong: int = 0
    gate_fail_right: int = 0
    gate_fail_wrong: int = 0
    canary_promoted_right: int = 0
    canary_promoted_wrong: int = 0
    canary_rolled_back_right: int = 0
    canary_rolled_back_wrong: int = 0
    first_deployments: int = 0
    moves_wrong: int = 0  # champion moves (first deployments, promotions) to a worse model
    wrong_move_units: float = 0.0  # their extra absolute error over the 28 days
    worst_move: float = float("-inf")  # the worst champion move, relative WAPE
    passed_not_deployed: int = 0
    equivalent: int = 0  # decisions between models within the band (right either way)

    def add(self, j: Judged) -> None:
        """Count one judged decision."""
        verdict = (
            ("pass" if j.passed else "fail")
            if j.kind == "gate"
            else ("promoted" if j.passed else "rolled_back")
        )
        name = f"{j.kind}_{verdict}_{'right' if j.right else 'wrong'}"
        setattr(self, name, getattr(self, name) + 1)
        if j.kind == "gate" and j.passed and not j.deployed:
            self.passed_not_deployed += 1
        self.equivalent += int(j.equivalent)
        moved = j.first_deployment or (j.kind == "canary" and j.passed)
        self.first_deployments += int(j.first_deployment)
        if moved:
            self.worst_move = max(self.worst_move, j.relative)
        if moved and not j.right:
            self.moves_wrong += 1
            self.wrong_move_units += j.extra_units

    @property
    def decisions(self) -> int:
        """Return how many gate verdicts and canary outcomes were judged."""
        return sum(
            getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name.startswith(("gate_", "canary_"))
        )

    @property
    def right(self) -> int:
        """Return how many of them were right in hindsight."""
        return sum(
            getattr(self, f.name) for f in dataclasses.fields(self) if f.name.endswith("_right")
        )

    @property
    def canaries(self) -> int:
        """Return how many canaries ended (promoted or rolled back)."""
        return sum(
            getattr(self, f.name) for f in dataclasses.fields(self) if f.name.startswith("canary_")
        )

    @property
    def rolled_back(self) -> int:
        """Return how many canaries were rolled back: each a GPU job and a canary wasted."""
        return self.canary_rolled_back_right + self.canary_rolled_back_wrong


def tallies(judged: list[Judged]) -> dict[str, Tally]:
    """Return a tally per tenant and one for all ("total")."""
    found: dict[str, Tally] = {spec.name: Tally() for spec in DEMO_TENANTS}
    found["total"] = Tally()
    for j in judged:
        for key in (j.tenant, "total"):
            found[key].add(j)
    return found


def table(found: dict[str, Tally]) -> str:
    """Return the tallies as a Markdown table (right / wrong in each cell)."""
    lines = [
        "| tenant | gate passes right / wrong | gate rejections right / wrong | canary promotions "
        "right / wrong | canary rollbacks right / wrong | decisions right (within 1 %) | wrong "
        "champion moves (extra units over 28 d) | worst champion move | first deployments; "
        "passed, not deployed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in found.items():
        share = t.right / t.decisions if t.decisions else float("nan")
        lines.append(
            f"| {name} | {t.gate_pass_right} / {t.gate_pass_wrong} | {t.gate_fail_right} / "
            f"{t.gate_fail_wrong} | {t.canary_promoted_right} / {t.canary_promoted_wrong} | "
            f"{t.canary_rolled_back_right} / {t.canary_rolled_back_wrong} | {t.right} of "
            f"{t.decisions} ({share:.0%}; {t.equivalent}) | {t.moves_wrong} "
            f"({t.wrong_move_units:+,.0f}) | {t.worst_move:+.1%} | {t.first_deployments}; "
            f"{t.passed_not_deployed} |"
        )
    return "\n".join(lines)


def detail(judged: list[Judged]) -> str:
    """Return one line per decision, oldest first: what was decided and what hindsight says."""
    lines = []
    for j in sorted(judged, key=lambda j: (j.day, j.tenant, j.kind)):
        outcome = {
            ("gate", True): "pass",
            ("gate", False): "fail",
            ("canary", True): "promoted",
            ("canary", False): "rolled back",
        }[(j.kind, j.passed)]
        lines.append(
            f"{j.day} {j.tenant:13} {j.kind:6} {outcome:11} {j.candidate:18} vs "
            f"{j.replaced[:22]:22} "
            f"next 28 d WAPE {j.candidate_wape:.4f} vs {j.replaced_wape:.4f} ({j.relative:+.1%}) "
            f"{'equivalent' if j.equivalent else 'right' if j.right else 'WRONG'}"
            + (
                f" (decided on {j.rows_decided_on} rows by {j.rule} after {j.canary_days} days, "
                f"{j.inconclusive} inconclusive)"
                if j.kind == "canary"
                else ""
            )
        )
    return "\n".join(lines)


def canary_summary(judged: list[Judged], settings: RolloutSettings) -> str:
    """Return how the canaries were decided: the rule, how long they took, what extended them."""
    canaries = [j for j in judged if j.kind == "canary"]
    rules = pd.Series([j.rule for j in canaries], dtype=object).value_counts()
    days = [j.canary_days for j in canaries]
    rule = settings.canary_rule
    shown = (
        f"canary rule {rule}"
        + (
            f" (min rows {settings.canary_min_rows}, {settings.canary_min_days:g} day(s) of "
            f"canary traffic, {settings.canary_confidence:.0%} interval, inconclusive limit "
            f"{settings.canary_inconclusive_limit}, final rule {settings.canary_final_rule})"
            if rule == "evidence"
            else ""
        )
        + f": decided by {', '.join(f'{r} {n}' for r, n in rules.items()) or 'none'}; "
        f"{sum(j.inconclusive for j in canaries)} inconclusive analyses; "
        f"{np.mean(days) if days else float('nan'):.1f} demo days a canary on average"
    )
    return shown


def load() -> str:
    """Return the 1, 5 and 15 minute load averages."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    """Run the replay and print the figures (and write them as JSON when asked)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=DEMO_DAYS, help="demo days to replay")
    parser.add_argument("--approve-drift", action="store_true", help="approve drift alerts at once")
    parser.add_argument(
        "--gate",
        choices=["margin", "evidence"],
        default="margin",
        help="margin: models/gate.py's judge_candidate (one holdout, RETRAIN_GATE_MARGIN); "
        "evidence: models/gate_evidence.py (windows weighted by recency, paired bootstrap, "
        "store guard; RETRAIN_GATE_* settings, the export's holdout as long as the windows)",
    )
    parser.add_argument(
        "--refit",
        action="store_true",
        help="what-if (not the platform's): after gating on a holdout longer than 7 days, "
        "deploy the same training on the window up to its last 7 days",
    )
    parser.add_argument(
        "--canary",
        choices=["wape", "evidence"],
        help="the canary's quality rule (RETRAIN_CANARY_RULE; default: the environment's, else "
        "wape): wape on the demo's 10 rows, or evidence (deployment/canary_evidence.py: paired "
        "interval, rows from the tenant's volume, inconclusive extends the step, a final rule)",
    )
    parser.add_argument("--json", type=Path, help="write every judged decision here")
    parser.add_argument("--quiet", action="store_true", help="no line per decision while replaying")
    args = parser.parse_args(argv)
    for name, value in DEMO_ENVIRONMENT.items():  # the demo's settings, unless set
        os.environ.setdefault(name, value)
    if args.canary:
        os.environ["RETRAIN_CANARY_RULE"] = args.canary
    started, cpu = time.perf_counter(), time.process_time()
    print(f"load before: {load()} ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="hindsight-") as folder:
        rules = GateRules.from_settings()
        replay = Replay(
            Path(folder),
            args.days,
            args.approve_drift,
            gate=evidence_gate(rules) if args.gate == "evidence" else None,
            holdout_days=rules.holdout_days,
            refit=args.refit,
            say=(lambda _: None) if args.quiet else print,
        )
        judged = replay.run()
        served = replay.served_error()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    found = tallies(judged)
    print()
    print(detail(judged))
    print()
    print(table(found))
    total = found.get("total", Tally())
    print(
        f"\n{args.days} demo days; canaries {total.canaries} ({total.rolled_back} rolled back), "
        f"first deployments {total.first_deployments}; gate margin {replay.margin:.0%}, canary "
        f"min rows {replay.settings.min_actuals}, tolerance {replay.settings.wape_tolerance:.0%}"
    )
    print(canary_summary(judged, replay.settings))
    print(
        "served WAPE (the champion of each demo day, every row): "
        + ", ".join(f"{name} {e / v:.4f}" for name, (e, v) in served.items())
    )
    print(f"wall {wall:.1f} s, CPU {cpu:.1f} s; load after: {load()}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "days": args.days,
                    "wall_seconds": wall,
                    "cpu_seconds": cpu,
                    "tallies": {k: dataclasses.asdict(v) for k, v in found.items()},
                    "served_wape": {k: e / v for k, (e, v) in served.items()},
                    "decisions": [
                        {**dataclasses.asdict(j), "day": j.day.isoformat(), "right": j.right}
                        for j in judged
                    ],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
