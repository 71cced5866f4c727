"""`customer_discovery`: a folder in the landing zone makes its customer a partition.

A folder whose name is not a safe slug is never added; the tick says which folder and why, so
the person who created it can rename it.
"""

import dagster as dg

from retrain_assets.customers import (
    CUSTOMER_PARTITIONS,
    CUSTOMERS,
    InvalidCustomerName,
    validate_customer_name,
)
from retrain_assets.landing import customer_folders, read_manifest_country
from retrain_assets.settings import landing_root
from retrain_assets.store.customers import register_customers
from retrain_assets.store.resource import ProjectDatabase

LOGGED_NAMES = 100  # one log line per new customer up to this many, then a count


@dg.sensor(
    minimum_interval_seconds=15,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds a `customers` partition for every new, validly named landing folder.",
)
def customer_discovery(
    context: dg.SensorEvaluationContext, project_db: ProjectDatabase
) -> dg.SensorResult:
    """Register new customers found in the landing zone; report folders that were refused."""
    root = landing_root()
    known = set(context.instance.get_dynamic_partitions(CUSTOMER_PARTITIONS))
    new, refused = [], []
    for folder in customer_folders(root):
        if folder in known:
            continue
        try:
            validate_customer_name(folder)
        except InvalidCustomerName as err:
            refused.append(f"folder {folder!r} in {root}: {err}")  # repr: shows a newline
            continue
        new.append(folder)
    # One statement for every new customer (a first tick may find 100,000 folders).
    register_customers(
        project_db.connection_url(),
        {name: read_manifest_country(root, name) for name in new},
        "customer_discovery",
    )
    for name in new[:LOGGED_NAMES]:
        context.log.info(f"new customer {name} (folder {root}/{name})")
    if len(new) > LOGGED_NAMES:
        context.log.info(f"... and {len(new) - LOGGED_NAMES} more new customers in {root}")
    for reason in refused:
        context.log.warning(f"landing folder refused: {reason}")
    if new:
        return dg.SensorResult(dynamic_partitions_requests=[CUSTOMERS.build_add_request(new)])
    summary = f"no new customer folders in {root}"
    if refused:
        summary += f"; refused: {'; '.join(refused)}"
    return dg.SensorResult(skip_reason=summary)
