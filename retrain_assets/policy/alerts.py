"""`drift_alerts`: drift that crossed a customer's threshold and waits for a person.

Drift never retrains by itself. The sensor records one pending alert per customer; a person
approves it with the `approve_drift_retraining` job, which records the decision. Any new
decision for the customer (approval, volume, schedule, manual) resolves the alert.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from retrain_assets.policy.drift import DriftMeasure
from retrain_assets.store.database import transaction

_COLUMNS = """id, customer, decision_id, feature, measure, threshold, recent_first, recent_last,
    detected_at"""


@dataclass(frozen=True)
class DriftAlert:
    """A pending request to approve retraining because of drift."""

    id: int
    customer: str
    decision_id: int
    feature: str
    measure: float
    threshold: float
    recent_first: dt.date
    recent_last: dt.date
    detected_at: dt.datetime

    def describe(self) -> str:
        """Return the alert as one line for logs and decision reasons."""
        return (
            f"drift: {self.feature} moved {self.measure:.2f} standard deviations "
            f"(threshold {self.threshold:g}) over {self.recent_first} .. {self.recent_last} "
            f"against decision {self.decision_id}'s training window"
        )


def pending_alerts(url: str) -> dict[str, DriftAlert]:
    """Return every customer's pending (unresolved) alert."""
    with transaction(url) as cur:
        cur.execute(f"SELECT {_COLUMNS} FROM drift_alerts WHERE resolved_by IS NULL")
        return {row[1]: DriftAlert(*row) for row in cur.fetchall()}


def raise_alert(
    url: str, customer: str, decision_id: int, drift: DriftMeasure, threshold: float
) -> DriftAlert:
    """Record a pending alert for the customer (the existing one if it already has one)."""
    with transaction(url) as cur:
        cur.execute(
            f"""
            INSERT INTO drift_alerts (customer, decision_id, feature, measure, threshold,
                recent_first, recent_last)
            VALUES (%s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (customer) WHERE resolved_by IS NULL DO NOTHING
            RETURNING {_COLUMNS}
            """,
            (
                customer,
                decision_id,
                drift.feature,
                drift.value,
                threshold,
                drift.recent_first,
                drift.recent_last,
            ),
        )
        row = cur.fetchone()
    return DriftAlert(*row) if row else pending_alerts(url)[customer]
