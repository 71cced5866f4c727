"""`sales`: every customer's landing files for the run's days, typed and validated.

Good rows go on; bad rows are quarantined with file, line and reason; a missing or unreadable
file is recorded and fails the non-blocking `landing_files_complete` check for that day, but
never stops the other customers.
"""

import datetime as dt
from collections.abc import Iterator, Sequence

import dagster as dg
import pandas as pd

from retrain_assets.asset_keys import SALES
from retrain_assets.customers import (
    CUSTOMER_PARTITIONS,
    refused_partition_message,
    split_customer_partitions,
)
from retrain_assets.features.landing_outcomes import record_outcome_days
from retrain_assets.features.landing_reader import read_landing_day
from retrain_assets.features.partitions import DAILY
from retrain_assets.features.validation import FileOutcome, empty_sales
from retrain_assets.settings import landing_root
from retrain_assets.store.resource import ProjectDatabase

VALIDATION_VERSION = "sales-v2"  # v2: exact integers, control characters, true lines
FILES_CHECK = "landing_files_complete"


def validate_days(
    root: str, customers: Sequence[str], keys: Sequence[str]
) -> dict[str, list[FileOutcome]]:
    """Read and validate every customer's file of every day: each file read once.

    Plain Python (no Dagster): the asset and the backfill benchmark's reference both call it.
    """
    days = {key: dt.date.fromisoformat(key) for key in keys}
    return {key: [read_landing_day(root, c, day) for c in customers] for key, day in days.items()}


def accepted_rows(outcomes_by_day: dict[str, list[FileOutcome]]) -> pd.DataFrame:
    """Return the accepted rows of the days, day by day and customer by customer, as one frame."""
    frames = [empty_sales()]
    for outcomes in outcomes_by_day.values():
        frames += [o.accepted for o in outcomes if len(o.accepted)]
    return pd.concat(frames, ignore_index=True)


def _day_metadata(outcomes: list[FileOutcome]) -> dict[str, object]:
    return {
        "rows_accepted": dg.MetadataValue.json({o.customer: len(o.accepted) for o in outcomes}),
        "rows_quarantined": dg.MetadataValue.json(
            {o.customer: len(o.quarantined) for o in outcomes}
        ),
        "files_missing": dg.MetadataValue.json(
            {o.file: [p.reason for p in o.problems] for o in outcomes if o.failed}
        ),
        "customers": len(outcomes),
    }


def _shown(refused: list[str]) -> list[str]:
    """Return refused partition keys as shown in metadata: quoted, at most 60 characters."""
    return [repr(key[:60]) for key in refused]


def _check_evaluation(
    day: str, outcomes: list[FileOutcome], refused: list[str]
) -> dg.AssetCheckEvaluation:
    failed = [o for o in outcomes if o.failed]
    description = (
        f"{len(failed)} of {len(outcomes)} customer file(s) missing or unreadable on {day}"
        if failed
        else f"all {len(outcomes)} customer file(s) read on {day}"
    )
    if refused:
        description += (
            f"; {len(refused)} customers partition(s) skipped, not a safe customer name: "
            + ", ".join(_shown(refused))
        )
    return dg.AssetCheckEvaluation(
        asset_key=SALES,
        check_name=FILES_CHECK,
        passed=not failed and not refused,
        partition=day,
        blocking=False,
        description=description,
        metadata={
            "failed_files": dg.MetadataValue.json({o.file: o.problems[0].reason for o in failed}),
            **({"refused_partitions": dg.MetadataValue.json(_shown(refused))} if refused else {}),
        },
    )


@dg.asset(
    key=SALES,
    group_name="features",
    partitions_def=DAILY,
    backfill_policy=dg.BackfillPolicy.single_run(),
    code_version=VALIDATION_VERSION,
    kinds={"pandas", "parquet"},
    check_specs=[
        dg.AssetCheckSpec(
            FILES_CHECK,
            asset=SALES,
            blocking=False,
            partitions_def=DAILY,
            description="Every known customer's file for the day was found and readable.",
        )
    ],
)
def sales(
    context: dg.AssetExecutionContext, project_db: ProjectDatabase
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Typed, validated sales rows of every known customer, one Parquet file per day."""
    customers, refused = split_customer_partitions(
        context.instance.get_dynamic_partitions(CUSTOMER_PARTITIONS)
    )
    for key in refused:  # never a path from an unsafe key: it could leave the landing root
        context.log.error(refused_partition_message(key))
    db_url, root = project_db.connection_url(), landing_root()
    outcomes_by_day = validate_days(root, customers, list(context.partition_keys))
    # The quarantine records and file problems of the whole range: one transaction.
    record_outcome_days(
        db_url,
        {dt.date.fromisoformat(key): outcomes for key, outcomes in outcomes_by_day.items()},
        context.run.run_id,
    )
    evaluations: list[dg.AssetCheckEvaluation] = []
    for key, outcomes in outcomes_by_day.items():
        context.add_asset_metadata(_day_metadata(outcomes), partition_key=key)
        evaluations.append(_check_evaluation(key, outcomes, refused))
        for outcome in outcomes:
            for problem in outcome.problems:
                context.log.warning(f"{outcome.file}: {problem.severity}: {problem.reason}")
    frame = accepted_rows(outcomes_by_day)
    del outcomes_by_day
    yield dg.Output(
        frame,
        metadata={
            "rows": len(frame),
            "days": len(evaluations),
            "customers": len(customers),
            **({"refused_partitions": dg.MetadataValue.json(_shown(refused))} if refused else {}),
        },
    )
    yield _check_result(context, evaluations)


def _check_result(
    context: dg.AssetExecutionContext, evaluations: list[dg.AssetCheckEvaluation]
) -> dg.AssetCheckResult:
    """One evaluation per day; Dagster attaches the result to the day only in one-day runs."""
    failed = [e.partition for e in evaluations if not e.passed]
    if len(evaluations) == 1:
        only = evaluations[0]
        return dg.AssetCheckResult(
            check_name=FILES_CHECK,
            passed=only.passed,
            metadata=only.metadata,
            description=only.description,
        )
    for evaluation in evaluations:
        context.log_event(evaluation)
    return dg.AssetCheckResult(
        check_name=FILES_CHECK,
        passed=not failed,
        description=f"{len(failed)} of {len(evaluations)} day(s) had missing or unreadable files",
        metadata={"days_failed": dg.MetadataValue.json(failed)},
    )
