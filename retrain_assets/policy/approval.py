"""`approve_drift_retraining`: a person approves retraining a customer whose features drifted.

Launch it from the Dagster UI with the customer's partition. The approval is the decision: it
records a `drift` decision on the current snapshot choice and resolves the alert; the
`retraining_policy` sensor requests `training_job` for it on its next tick.
"""

import dagster as dg

from retrain_assets.customers import CUSTOMER_PARTITIONS, CUSTOMERS, customer_of
from retrain_assets.policy.alerts import pending_alerts
from retrain_assets.policy.busy import busy_customers
from retrain_assets.policy.decisions import Decision, DecisionRefused, record_decision
from retrain_assets.policy.history import choose_window
from retrain_assets.policy.rule import APPROVAL_JOB
from retrain_assets.policy.run_decision import USER_TAG
from retrain_assets.policy.thresholds import settings_for
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets.store.snapshots import latest_snapshots

APPROVED_BY = "approval via the Dagster UI"


def approve(
    url: str, instance: dg.DagsterInstance, customer: str, who: str, run_id: str
) -> Decision:
    """Record the drift decision for a customer's pending alert and return it.

    Raises:
        DecisionRefused: unknown customer, no pending alert, or the customer is busy training.
    """
    if not instance.has_dynamic_partition(CUSTOMER_PARTITIONS, customer):
        raise DecisionRefused(f"{APPROVAL_JOB}: unknown customer {customer!r} (no partition)")
    alert = pending_alerts(url).get(customer)
    if alert is None:
        raise DecisionRefused(
            f"{APPROVAL_JOB}: no drift alert is waiting for approval for {customer}; the "
            "retraining_policy sensor raises one when drift crosses the customer's threshold"
        )
    busy = busy_customers(url, instance).get(customer)
    if busy:
        raise DecisionRefused(
            f"{APPROVAL_JOB}: {customer} is busy ({busy}); the alert stays pending, approve "
            "again when that training has finished"
        )
    ref = choose_window(latest_snapshots(url), settings_for(url, customer).window_days)
    details = {"drift_alert": alert.id, "approval_run": run_id}
    return record_decision(
        url, customer, "drift", f"{alert.describe()}; approved", ref, who, details
    )


@dg.op(description="Records the drift decision for this customer's pending drift alert.")
def approve_drift(context: dg.OpExecutionContext, project_db: ProjectDatabase) -> None:
    """Approve the partition's customer: one drift decision, which the sensor then launches."""
    who = context.run.tags.get(USER_TAG) or APPROVED_BY
    decision = approve(
        project_db.connection_url(),
        context.instance,
        customer_of(context),
        who,
        context.run.run_id,
    )
    context.log.info(
        f"decision {decision.id} ({decision.policy}) for {decision.customer} by {who}: "
        f"{decision.reason}; snapshot {decision.first_day} .. {decision.last_day}"
    )


@dg.job(
    name=APPROVAL_JOB,
    partitions_def=CUSTOMERS,
    description="Approve retraining a customer whose features drifted (pick its partition).",
)
def approve_drift_retraining() -> None:
    """One op: the approval is the decision."""
    approve_drift()
