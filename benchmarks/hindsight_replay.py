"""The decision benchmark's replay: tenants day by day, decided by the platform's own functions.

The simulator and features (`demo/feature_history.py`), the policy's rule (`policy/rule.py`'s
`policy_outcome`, drift by `policy/drift.py`), the export and the GPU service's training with
the spec `training_job` submits (`models/training_job_asset.py`'s `job_spec`), the gate as
`beats_champion` decides it (`models/gate_decision.py`'s `decide_gate`: the rule, then the
intervals' coverage), the deploy-time check as `challenger_beats_champion_now` decides it
(`recent_window.choose_days`, `models/deploy_gate.py`'s `judge_deploy`), and the canary
through the rollout machine (`hindsight_canary.py`). Nothing here decides anything itself.

The cadence: one step per demo day. Each tenant's rows of day d are served (the canary's share
logged), day d is published, each canary is advanced by the controller's ticks of a demo day,
then the policy decides; a decision's training, gate, registration and deploy-time check
finish within the day, and a deployed canary serves from day d + 1. A passing candidate is
deployed only when no rollout is in progress (as `auto_deploy` does). A drift alert waits for
a person, as in the demo, unless `approve_drift`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from hindsight_canary import CanaryRun, start_run, tick
from hindsight_score import HINDSIGHT_DAYS, Judged, Model
from upath import UPath

from retrain_assets.asset_keys import STORE_DAY_FEATURES, name_of
from retrain_assets.demo.feature_history import tenant_features
from retrain_assets.demo.tenants import DEFAULT_HISTORY_DAYS, DEFAULT_START, TenantSpec
from retrain_assets.deployment.canary_evidence import daily_rows
from retrain_assets.deployment.recent_window import choose_days
from retrain_assets.deployment.rollout_machine import rollout_machine
from retrain_assets.deployment.rollout_settings import rollout_settings
from retrain_assets.features.evidence import EVIDENCE_COLUMNS, EvidenceRules, judge_parts
from retrain_assets.features.feature_math import FEATURE_VERSION
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.training_export import LABEL, Export, export_customer
from retrain_assets.gpu.service.schemas import TrainingSpec
from retrain_assets.gpu.service.trainer import train
from retrain_assets.models.deploy_gate import judge_deploy
from retrain_assets.models.gate import SEASONAL_NAIVE, ReferenceModel, gate_rule, lightgbm_predictor
from retrain_assets.models.gate_decision import decide_gate
from retrain_assets.models.gate_evidence import GateRules
from retrain_assets.models.scoring import seasonal_naive
from retrain_assets.models.training_job_asset import TrainingJobConfig, job_spec
from retrain_assets.policy.decisions import Decision
from retrain_assets.policy.drift import DayFrames, measure_drift
from retrain_assets.policy.history import Published, choose_window
from retrain_assets.policy.rule import policy_outcome
from retrain_assets.policy.thresholds import DEFAULTS, PolicySettings, validate
from retrain_assets.prediction_intervals import IntervalTable, coverage_tolerance
from retrain_assets.runtime.demo_mode import DEMO_POLICY, demo_day_seconds
from retrain_assets.serving.routing import canary_mask, request_key
from retrain_assets.settings import gate_margin
from retrain_assets.store.snapshots import SnapshotRecord

FEATURES = name_of(STORE_DAY_FEATURES)
HISTORY_END = DEFAULT_START + dt.timedelta(days=DEFAULT_HISTORY_DAYS - 1)  # demo day 0
NAIVE = Model(SEASONAL_NAIVE, seasonal_naive)


def reference_of(model: Model, alias: str = "champion") -> ReferenceModel | None:
    """Return the gate's view of a model (None: seasonal naive, the gate's last resort)."""
    if model.decided is None:
        return None
    return ReferenceModel(model.name, model.predict, alias, model.name)


def days_after(rows: pd.DataFrame, through: dt.date | None) -> pd.DataFrame:
    """Return the rows dated after `through` (all of them for None: the seasonal naive)."""
    if through is None:
        return rows
    return rows[rows["date"] > pd.Timestamp(through)].reset_index(drop=True)


@dataclass
class Rollout:
    """A canary in progress: the machine's run, the two models and the gate that let it in."""

    run: CanaryRun
    candidate: Model
    champion: Model
    gate: Judged


@dataclass
class TenantState:
    """What the registry and the policy hold for one tenant during the replay."""

    spec: TenantSpec
    settings: PolicySettings
    champion: Model | None = None
    challenger: Model | None = None
    last: Decision | None = None
    alert: bool = False
    alerts: int = 0  # drift alerts left waiting for a person
    rollout: Rollout | None = None
    versions: int = 0
    judged: list[Judged] = field(default_factory=list)
    models: dict[str, Model] = field(default_factory=lambda: {NAIVE.name: NAIVE})
    served: dict[dt.date, str] = field(default_factory=dict)  # the champion of each demo day


def demo_policy(spec: TenantSpec) -> dict[str, Any]:
    """Return the tenant's demo policy overrides (none for a scenario's tenants)."""
    overrides = DEMO_POLICY.get(spec.name, {})
    return {k: type(getattr(DEFAULTS, k))(v) for k, v in overrides.items()}


class Replay:
    """Tenants, day by day, with the platform's decisions."""

    def __init__(
        self,
        root: Path,
        tenants: Sequence[TenantSpec],
        days: int,
        approve_drift: bool = False,
        say: Callable[[str], None] = print,
        rounds: int | None = None,
        refit: bool = False,
    ) -> None:
        """Simulate every tenant's sales and features through `days` + 28 demo days.

        `rounds`: boosting rounds a training runs (None: `training_job`'s default).
        """
        self.root, self.days, self.approve_drift, self.say = root, days, approve_drift, say
        self.refit = refit
        self.store = ParquetPartitionStore(str(root / "features"))
        self.settings = rollout_settings()
        self.machine = rollout_machine(self.settings)
        self.day_seconds = demo_day_seconds() or 20.0
        self.ticks = max(1, round(self.day_seconds / self.settings.interval_seconds))
        self.margin = gate_margin()
        self.rules = EvidenceRules.from_settings()
        rounds = rounds or TrainingJobConfig().num_boost_round
        # training_job's own settings; one checkpoint a job (the same model, less time)
        self.job = TrainingJobConfig(num_boost_round=rounds, checkpoint_every=rounds)
        self.holdout_days = self.job.export_holdout_days()
        last = HISTORY_END + dt.timedelta(days=days + HINDSIGHT_DAYS)
        self.features = {spec.name: tenant_features(spec, last) for spec in tenants}
        self.by_day = {
            name: dict(iter(frame.groupby(frame["date"].dt.date)))
            for name, frame in self.features.items()
        }
        self.published: Published = {}
        self.frames = DayFrames(self.store)
        self.ids = iter(range(1, 1_000_000))
        self.started = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        self.trainings = 0
        self.tenants = [
            TenantState(
                spec, validate(dataclasses.replace(DEFAULTS, **demo_policy(spec)), spec.name)
            )
            for spec in tenants
        ]

    def run(self) -> list[Judged]:
        """Replay history and demo days 0 .. `days`; return every decision (not yet judged)."""
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
                self.analyse(tenant, day, k)
                self.decide(tenant, day, k)
        return [j for t in self.tenants for j in t.judged]

    def publish(self, day: dt.date) -> None:
        """Write the day's features (every tenant, one file) and record the snapshot."""
        rows = [self.by_day[t.spec.name].get(day) for t in self.tenants]
        present = [r for r in rows if r is not None]
        if not present:
            return
        self.store.write(FEATURES, day.isoformat(), pd.concat(present, ignore_index=True))
        self.published[day] = SnapshotRecord(
            day,
            f"v-{day}",
            FEATURE_VERSION,
            {t.spec.name: len(r) for t, r in zip(self.tenants, rows, strict=True) if r is not None},
            False,
            None,
            "replay",
        )

    def tick_time(self, k: int) -> dt.datetime:
        """Return the controller's clock after demo day k was published (the day's end)."""
        return self.started + dt.timedelta(seconds=(k + 1) * self.day_seconds)

    # -- the canary -------------------------------------------------------------------------

    def serve(self, tenant: TenantState, day: dt.date) -> None:
        """Forecast the tenant's rows of `day` (before it lands): the canary's share logged."""
        rollout = tenant.rollout
        weight = rollout.run.weight if rollout else None
        rows = self.by_day[tenant.spec.name].get(day)
        if rollout is None or weight is None or rows is None:
            return
        keys = [
            request_key(s, i, day) for s, i in zip(rows["store_id"], rows["item_id"], strict=True)
        ]
        routed = rows[canary_mask(tenant.spec.name, keys, weight)]
        run = rollout.run
        run.requests[run.state] = run.requests.get(run.state, 0) + len(routed)
        if routed.empty:
            return
        run.pairs.append(
            pd.DataFrame(
                {
                    "rollout_id": run.rollout_id,
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

    def analyse(self, tenant: TenantState, day: dt.date, k: int) -> None:
        """Advance the tenant's rollout by the controller's ticks of one demo day."""
        rollout = tenant.rollout
        if rollout is None:
            return
        name = tenant.spec.name
        volume = daily_rows(self.published, [name])[name]
        for _ in range(self.ticks):
            tick(self.machine, rollout.run, self.settings, self.tick_time(k), volume)
        run = rollout.run
        if run.outcome is None:
            return
        last = run.analyses[-1] if run.analyses else None
        promoted = run.outcome == "promoted"
        tenant.judged.append(
            Judged(
                name,
                "canary",
                day,
                rollout.candidate.name,
                rollout.champion.name,
                promoted,
                run.reason,
                rows_decided_on=last.rows_with_actuals if last else 0,
                rule=(last.rule or "") if last else run.outcome,
                canary_days=(day - rollout.gate.day).days,
                inconclusive=sum(a.outcome == "inconclusive" for a in run.analyses),
            )
        )
        if promoted:
            tenant.champion = rollout.candidate
        tenant.rollout = None
        self.say(f"  {day} {name:13} canary {run.outcome}: {run.reason[:140]}")

    # -- the policy, the training, the gate and the deploy-time check -------------------------

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
                    tenant.alerts += 1
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
            next(self.ids),
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
        self.train_and_gate(tenant, day, k, tenant.last)

    def drift_of(self, last: Decision, recent: list[dt.date]) -> Any:
        """Measure drift as the policy's evaluation does (statistics from the feature files)."""
        window = sorted(dt.date.fromisoformat(d) for d in last.data_versions)
        baseline = self.frames.stats(last.customer, window)
        return measure_drift(baseline, last.customer, recent, self.frames)

    def train_and_gate(self, tenant: TenantState, day: dt.date, k: int, decision: Decision) -> None:
        """Export, train as `training_job` asks, gate, register; deploy when nothing rolls out."""
        name = tenant.spec.name
        ref = decision.snapshot
        frame = self.features[name]
        frame = frame[frame["date"].isin(pd.to_datetime(sorted(ref.data_versions)))]
        folder = self.root / "exports" / name / str(decision.id)
        export = export_customer(self.store, name, ref, self.holdout_days, UPath(folder), frame)
        train_part = pd.read_parquet(export.train_path, columns=EVIDENCE_COLUMNS)
        holdout = pd.read_parquet(export.holdout_path)
        evidence = judge_parts(name, train_part, holdout, self.rules)
        spec = TrainingSpec.model_validate(
            {**job_spec(self.job, name), "dataset_url": export.train_path}
        )
        result = train(spec, folder / "job")
        self.trainings += 1
        tenant.versions += 1
        candidate = Model(
            f"v{tenant.versions} ({day})",
            lightgbm_predictor(str(result.model_path)),
            day,
            pd.Timestamp(train_part["date"].max()).date(),
        )
        if not self.refit:  # a backtest model is never shipped: not among the choices
            tenant.models[candidate.name] = candidate
        reference = tenant.champion or tenant.challenger or NAIVE
        alias = "champion" if tenant.champion else "challenger"
        judged_on = holdout
        if self.refit:  # a refit champion has seen its window: judge on the days after it
            judged_on = days_after(holdout, reference.trained_through)
            evidence = judge_parts(name, train_part, judged_on, self.rules)
        gated = decide_gate(
            judged_on,
            candidate.predict,
            reference_of(reference, alias),
            self.margin,
            evidence,
            GateRules.from_settings(),
            self.rules,
            gate_rule(),
            IntervalTable.from_metrics(result.metrics),
            coverage_tolerance(),
        )
        verdict = gated.outcome.verdict
        gate = Judged(
            name, "gate", day, candidate.name, reference.name, verdict.passed, verdict.reason
        )
        gate.rule = str(gated.outcome.metadata.get("rule", ""))
        gate.metadata = dict(gated.outcome.metadata)
        shipped = candidate
        if self.refit:
            shipped = self.refit_model(name, f"v{tenant.versions}r ({day})", day, export, holdout)
            tenant.models[shipped.name] = shipped
            gate.candidate = shipped.name
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
        tenant.challenger = shipped
        if not busy:
            self.deploy(tenant, day, k, shipped, gate, holdout, candidate)

    def refit_model(
        self, name: str, label: str, day: dt.date, export: Export, holdout: pd.DataFrame
    ) -> Model:
        """Train the same spec on the whole window (training part and holdout): the refit.

        An experiment of the benchmark (`--refit`), not a platform setting: the gate still
        judges the backtest model, the refit carries no intervals of its own.
        """
        folder = Path(export.train_path).parent
        whole = folder / "whole.parquet"
        pd.concat([pd.read_parquet(export.train_path), holdout]).to_parquet(whole)
        spec = TrainingSpec.model_validate(
            {**job_spec(self.job, name), "dataset_url": str(whole), "intervals": None}
        )
        refitted = train(spec, folder / "refit")
        through = pd.Timestamp(holdout["date"].max()).date()
        return Model(label, lightgbm_predictor(str(refitted.model_path)), day, through)

    def deploy(
        self,
        tenant: TenantState,
        day: dt.date,
        k: int,
        candidate: Model,
        gate: Judged,
        holdout: pd.DataFrame,
        recipe: Model | None = None,
    ) -> None:
        """Run the deploy-time check, then the rollout machine (a first one promotes at once)."""
        name = tenant.spec.name
        with_rows = sorted(d for d, r in self.published.items() if r.rows_per_customer.get(name))
        end = pd.Timestamp(holdout["date"].max()).date() if not holdout.empty else None
        window = choose_days(with_rows, end, self.settings.check_days, candidate.name)
        frame = self.features[name]
        rows = frame[frame["date"].isin(pd.to_datetime(window.days)) & frame[LABEL].notna()]
        champion = tenant.champion or NAIVE
        if self.refit:  # only days the champion never trained on
            rows = days_after(rows, champion.trained_through)
        check = judge_deploy(
            rows.reset_index(drop=True),
            (recipe or candidate).predict,
            reference_of(champion),
            self.settings.deploy_margin,
            candidate.name,
        ).verdict
        tenant.judged.append(
            Judged(name, "deploy", day, candidate.name, champion.name, check.passed, check.reason)
        )
        if not check.passed:
            self.say(f"  {day} {name:13} deploy-time check failed: {check.reason[:110]}")
            return
        gate.deployed = True
        previous = tenant.champion.name if tenant.champion else None
        run = start_run(name, next(self.ids), candidate.name, previous)
        rollout = Rollout(run, candidate, champion, gate)
        tenant.rollout = rollout
        tick(self.machine, run, self.settings, self.tick_time(k), 0.0)
        if run.outcome == "promoted" and previous is None:  # START -> PROMOTE: no canary
            gate.first_deployment = True
            tenant.champion = candidate
            tenant.rollout = None
