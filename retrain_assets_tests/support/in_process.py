"""Publishing feature days in the test's own process, as one `features_job` range run."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from retrain_assets.definitions import FEATURES_JOB, build_definitions


def publish_feature_range(instance: dg.DagsterInstance, first: dt.date, last: dt.date) -> None:
    """Materialize `sales` and `store_day_features` for `first`..`last` in one run, or fail."""
    result = (
        build_definitions()
        .resolve_job_def(FEATURES_JOB)
        .execute_in_process(
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": first.isoformat(),
                "dagster/asset_partition_range_end": last.isoformat(),
            },
        )
    )
    assert result.success, f"features_job over {first}..{last} failed"
