"""The rollout's thresholds, step weights and timers: the settings model's rollout fields.

Read when a tick, a run or a command starts (never at import time), so tests and the demo
shorten the timers through the environment. The defaults and bounds are the fields'
(settings_model/model.py); a value out of range is refused there, naming the variable.
"""

from __future__ import annotations

from dataclasses import dataclass

from retrain_assets.settings_model import FIELDS, current_settings


@dataclass(frozen=True)
class RolloutSettings:
    """How a rollout advances and when a canary step passes.

    Attributes:
        interval_seconds: the `rollout_controller` tick interval (one "interval").
        step_weights: canary traffic share of each step, increasing, each in (0, 1).
        step_seconds: minimum time a step runs before it is analysed.
        min_predictions: canary predictions a step needs before it is analysed.
        min_actuals: canary-routed rows with materialized actual sales (and a champion
            shadow prediction) a step needs before it is analysed.
        max_error_rate: largest share of failed canary predictions in a step.
        max_nonfinite: most NaN/inf canary predictions in a step.
        wape_tolerance: how much (relative) the canary's WAPE may exceed the champion's on the
            same rows: 0.05 allows 5 % worse.
        max_no_data_intervals: analyses in a row without enough data before the step fails
            ("no data counts as a failure", as in Flagger).
        check_days: days with actuals the deploy-time check re-scores on.
        deploy_margin: how much lower (relative) the challenger's WAPE must be than the
            champion's at the deploy-time check (0: lower at all).
        pass_max_age_hours: how old a deploy-time pass may be for a later run of
            `deployment_decision` alone to rely on it.
        canary_rule: which rule judges a step's forecast quality: `wape` (the canary's WAPE
            within `wape_tolerance` of the champion's on `min_actuals` rows) or `evidence`
            (`canary_evidence.py`: a paired interval, inconclusive extends the step).
        canary_confidence: confidence of the evidence rule's paired bootstrap interval.
        canary_min_rows: rows with actuals the evidence rule needs at least (Spinnaker's
            canary guidance: 50 data points); a bootstrap over a handful of store-days is noise.
        canary_min_days: days of the customer's canary traffic a step's rows must cover at
            least (with `canary_min_rows` as the floor): the sample size from the volume.
        canary_inconclusive_limit: inconclusive analyses of a step (each extends it by
            `step_seconds`) before `canary_final_rule` decides.
        canary_final_rule: what decides a step still inconclusive after the limit: `point`
            (the point estimate within `wape_tolerance` passes) or `rollback`.
    """

    interval_seconds: int = FIELDS["rollout_interval_seconds"].default
    step_weights: tuple[float, ...] = FIELDS["rollout_steps"].default
    step_seconds: int = FIELDS["rollout_step_seconds"].default
    min_predictions: int = FIELDS["rollout_min_predictions"].default
    min_actuals: int = FIELDS["rollout_min_actuals"].default
    max_error_rate: float = FIELDS["rollout_max_error_rate"].default
    max_nonfinite: int = FIELDS["rollout_max_nonfinite"].default
    wape_tolerance: float = FIELDS["rollout_wape_tolerance"].default
    max_no_data_intervals: int = FIELDS["rollout_max_no_data_intervals"].default
    check_days: int = FIELDS["deploy_check_days"].default
    deploy_margin: float = FIELDS["deploy_gate_margin"].default
    pass_max_age_hours: float = FIELDS["deploy_pass_max_age_hours"].default
    canary_rule: str = FIELDS["canary_rule"].default
    canary_confidence: float = FIELDS["canary_confidence"].default
    canary_min_rows: int = FIELDS["canary_min_rows"].default
    canary_min_days: float = FIELDS["canary_min_days"].default
    canary_inconclusive_limit: int = FIELDS["canary_inconclusive_limit"].default
    canary_final_rule: str = FIELDS["canary_final_rule"].default

    @property
    def canary_visit_budget(self) -> int:
        """Return the visits a canary step may take: entering, analyses, a few retries."""
        return self.max_no_data_intervals + self.canary_inconclusive_limit + 20


DEFAULTS = RolloutSettings()


def rollout_settings() -> RolloutSettings:
    """Return the rollout's settings now in force, defaults for unset variables.

    Raises:
        SettingsError: a variable is malformed or out of range (the message names it).
    """
    settings = current_settings()
    return RolloutSettings(
        interval_seconds=settings.rollout_interval_seconds,
        step_weights=settings.rollout_steps,
        step_seconds=settings.rollout_step_seconds,
        min_predictions=settings.rollout_min_predictions,
        min_actuals=settings.rollout_min_actuals,
        max_error_rate=settings.rollout_max_error_rate,
        max_nonfinite=settings.rollout_max_nonfinite,
        wape_tolerance=settings.rollout_wape_tolerance,
        max_no_data_intervals=settings.rollout_max_no_data_intervals,
        check_days=settings.deploy_check_days,
        deploy_margin=settings.deploy_gate_margin,
        pass_max_age_hours=settings.deploy_pass_max_age_hours,
        canary_rule=settings.canary_rule,
        canary_confidence=settings.canary_confidence,
        canary_min_rows=settings.canary_min_rows,
        canary_min_days=settings.canary_min_days,
        canary_inconclusive_limit=settings.canary_inconclusive_limit,
        canary_final_rule=settings.canary_final_rule,
    )


def step_name(weight: float) -> str:
    """Return the state name of a canary step: CANARY_10 for 0.10."""
    return f"CANARY_{round(weight * 100)}"
