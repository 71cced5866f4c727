"""`serving_model_fresh`: per customer, is the model that serves fresh? A check on `deployed_model`.

The `serving_report` sensor judges every customer on its own and has each change reported by a
run of `serving_freshness_job` (`models/freshness_report.py`), so the Checks tab shows every
customer green, yellow (warning) or red (error) at any time with nobody launching anything.
Its compute is the same judgement (in a run with the customer's partition), from the same
code, `models/freshness.py`.
"""

import dagster as dg

from retrain_assets.asset_keys import DEPLOYED_MODEL
from retrain_assets.customers import CUSTOMERS
from retrain_assets.dagster_private import CheckTarget
from retrain_assets.models.freshness import Freshness, judge_freshness
from retrain_assets.store.resource import ProjectDatabase

CHECK_NAME = "serving_model_fresh"
CHECK_KEY = dg.AssetCheckKey(DEPLOYED_MODEL, CHECK_NAME)
Target = CheckTarget  # the materialization an evaluation is aimed at
SEVERITY = {"warn": dg.AssetCheckSeverity.WARN, "error": dg.AssetCheckSeverity.ERROR}


def severity_of(verdict: Freshness) -> dg.AssetCheckSeverity:
    """Return the check's severity for a verdict (a passed one's too: Dagster records it)."""
    return SEVERITY.get(verdict.severity, dg.AssetCheckSeverity.WARN)


def check_evaluation(verdict: Freshness, target: Target | None = None) -> dg.AssetCheckEvaluation:
    """Return the verdict as an evaluation of this check on the customer's partition.

    `target`: the partition's latest materialization; without it a materialized partition's
    check shows as missing in the UI.
    """
    return dg.AssetCheckEvaluation(
        asset_key=DEPLOYED_MODEL,
        check_name=CHECK_NAME,
        passed=verdict.passed,
        severity=severity_of(verdict),
        description=verdict.reason,
        metadata=verdict.metadata(),
        partition=verdict.customer,
        target_materialization_data=target,
    )


@dg.asset_check(
    asset=DEPLOYED_MODEL,
    name=CHECK_NAME,
    partitions_def=CUSTOMERS,
    description="The serving champion's training data is at most schedule_days published days "
    "behind the newest feature day (warning), or twice that (error); says what holds the "
    "customer back and what waits for a person. Evaluated by the serving_report sensor.",
)
def serving_model_fresh(
    context: dg.AssetCheckExecutionContext, project_db: ProjectDatabase
) -> dg.AssetCheckResult:
    """Judge this customer's serving model now, as the sensor does."""
    customer = context.partition_key
    verdict = judge_freshness(project_db.connection_url(), [customer])[customer]
    return dg.AssetCheckResult(
        passed=verdict.passed,
        severity=SEVERITY.get(verdict.severity, dg.AssetCheckSeverity.WARN),
        description=verdict.reason,
        metadata=verdict.metadata(),
    )
