"""What Dagster shows of each customer's serving model, and the job that reports its freshness.

The project's tables say what serves (`champion_moves`) and how fresh it is
(`models/freshness.py`); Dagster's event log says what the UI shows. Both are compared on
every `serving_report` tick, so anything Dagster did not store (a tick whose events were lost
with the daemon, a report run that failed) is said again by the next tick, and nothing Dagster
holds is said twice. No table of ours remembers what was said: Dagster's records are that memory.

The check's evaluations are reported inside a run of `serving_freshness_job`, not as runless
events. Dagster 1.13.27 stores every runless evaluation as a row keyed (asset, check, run id
"", partition) under a unique index, so a partition's second runless evaluation fails with a
unique violation on its own PostgreSQL storage. Inside a run the key holds the run's id: one
run reports every customer whose verdict changed, each evaluation a new row, the latest shown.

The sensor executes that run in its own tick, in process (`report_in_process`): a report is a
few queries and inserts, and a run process of its own (Dagster's spawn, its imports) cost about
5 CPU-s each, 45 % of every run the test suite's platforms launched (docs/tests.md). A report run
the code server died in is left STARTED by nothing else: the next report marks it failed.
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import dagster as dg

from retrain_assets.asset_keys import DEPLOYED_MODEL
from retrain_assets.customers import CUSTOMER_PARTITIONS
from retrain_assets.models.freshness import Freshness, judge_freshness
from retrain_assets.models.freshness_check import CHECK_KEY, Target, check_evaluation, severity_of
from retrain_assets.store.resource import ProjectDatabase

JOB_NAME = "serving_freshness_job"
REPORTER_TAG = "retrain/reported_by"  # on the runs the sensor executes in process
REPORTER = "serving_report"
ORPHAN_AFTER_SECONDS = 600.0  # a report takes seconds; one unfinished this long lost its process
MOVE_KEY = "champion_move_id"  # the metadata entry of `deployed_model` naming the move shown
UNFINISHED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


@dataclass(frozen=True)
class Shown:
    """What Dagster holds for one customer.

    Its latest `deployed_model` materialization (and the champion move that one shows), and the
    latest evaluation of `serving_model_fresh`.
    """

    materialization: Target | None = None
    move_id: int | None = None
    evaluation: dg.AssetCheckEvaluation | None = None


def shown(instance: dg.DagsterInstance) -> dict[str, Shown]:
    """Return, per customer partition, what Dagster's event log holds (two or three queries)."""
    materialized = _latest_materializations(instance)
    evaluated = _latest_evaluations(instance)
    return {
        customer: Shown(
            materialization=materialized[customer][0] if customer in materialized else None,
            move_id=materialized[customer][1] if customer in materialized else None,
            evaluation=evaluated.get(customer),
        )
        for customer in sorted(set(materialized) | set(evaluated))
    }


def _latest_materializations(instance: dg.DagsterInstance) -> dict[str, tuple[Target, int | None]]:
    ids = instance.event_log_storage.get_latest_storage_id_by_partition(
        DEPLOYED_MODEL, dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    if not ids:
        return {}
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=DEPLOYED_MODEL, storage_ids=list(ids.values())),
        limit=len(ids),
    ).records
    found: dict[str, tuple[Target, int | None]] = {}
    for record in records:
        materialization = record.asset_materialization
        if record.partition_key is None or materialization is None:
            continue
        move = materialization.metadata.get(MOVE_KEY)
        move_id = move.value if move is not None and isinstance(move.value, int) else None
        target = Target(
            storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
        )
        found[record.partition_key] = (target, move_id if move_id != -1 else None)
    return found


def _latest_evaluations(instance: dg.DagsterInstance) -> dict[str, dg.AssetCheckEvaluation]:
    infos = instance.event_log_storage.get_asset_check_partition_info([CHECK_KEY])
    ids = [info.latest_check_event_storage_id for info in infos if info.partition_key]
    if not ids:
        return {}
    records = instance.event_log_storage.get_event_records(
        dg.EventRecordsFilter(dg.DagsterEventType.ASSET_CHECK_EVALUATION, storage_ids=ids),
        limit=len(ids),
    )
    found = {}
    for record in records:  # a planned evaluation's id finds no record: nothing shown
        evaluation = record.event_log_entry.asset_check_evaluation
        if evaluation is not None and evaluation.partition is not None:
            found[evaluation.partition] = evaluation
    return found


def is_shown(verdict: Freshness, now: Shown) -> bool:
    """Return whether Dagster shows this verdict, aimed at the latest materialization.

    The UI shows a partition's check passed or failed only when its latest evaluation targets
    the partition's latest materialization; an evaluation aimed at an older one shows "missing".
    """
    stored = now.evaluation
    if stored is None:
        return False
    aimed = stored.target_materialization_data
    latest = now.materialization
    # raw values, not a new evaluation: building 100,000 normalized ones per tick costs seconds
    return (
        stored.passed == verdict.passed
        and stored.severity == severity_of(verdict)
        and stored.description == verdict.reason
        and {key: value.value for key, value in stored.metadata.items()} == verdict.metadata()
        and (aimed.storage_id if aimed else None) == (latest.storage_id if latest else None)
    )


def unmaterialized(verdicts: Mapping[str, Freshness], now: Mapping[str, Shown]) -> list[str]:
    """Return the customers whose champion move is not the latest materialization's."""
    return [
        customer
        for customer, verdict in sorted(verdicts.items())
        if verdict.serving is not None
        and verdict.serving.move_id is not None
        and now.get(customer, Shown()).move_id != verdict.serving.move_id
    ]


def unreported(verdicts: Mapping[str, Freshness], now: Mapping[str, Shown]) -> list[str]:
    """Return the customers whose verdict Dagster does not show (changed, or aimed elsewhere)."""
    return [c for c, v in sorted(verdicts.items()) if not is_shown(v, now.get(c, Shown()))]


def fail_orphaned_reports(instance: dg.DagsterInstance, now: float) -> list[str]:
    """Mark failed the in-process report runs left unfinished; return their run ids.

    A report run executes inside a sensor tick, so one still unfinished long after it started
    died with its code server: nothing else would ever end it, and the UI would show it running.
    """
    records = instance.get_run_records(
        dg.RunsFilter(job_name=JOB_NAME, statuses=UNFINISHED, tags={REPORTER_TAG: REPORTER})
    )
    orphans = [
        r.dagster_run
        for r in records
        if now - (r.start_time or r.create_timestamp.timestamp()) > ORPHAN_AFTER_SECONDS
    ]
    for run in orphans:
        instance.report_run_failed(
            run, "its code server stopped during the report; the next report says it again"
        )
    return [run.run_id for run in orphans]


def report_in_process(
    instance: dg.DagsterInstance, project_db: ProjectDatabase
) -> dg.ExecuteInProcessResult:
    """Execute `serving_freshness_job` in this process, as a run stored on `instance`."""
    return serving_freshness_job.execute_in_process(
        # its events go to the run's event log; the code server's own log gets warnings only
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        instance=instance,
        resources={"project_db": project_db},
        tags={REPORTER_TAG: REPORTER},
        raise_on_error=False,
    )


@dg.op(
    out={},
    description="Reports serving_model_fresh for every customer whose verdict Dagster does not "
    "show yet, aimed at the partition's latest deployed_model materialization.",
)
def report_serving_freshness(
    context: dg.OpExecutionContext, project_db: ProjectDatabase
) -> Iterator[dg.AssetCheckEvaluation]:
    """Judge every customer now and yield the verdicts Dagster does not show.

    A customer whose champion move is not materialized yet waits: its verdict would be aimed at
    the materialization it replaces, which the UI shows as "missing". The sensor's tick
    materializes the move, and the next report aims the verdict at it.
    """
    customers = sorted(context.instance.get_dynamic_partitions(CUSTOMER_PARTITIONS))
    verdicts = judge_freshness(project_db.connection_url(), customers)
    now = shown(context.instance)
    waiting = set(unmaterialized(verdicts, now))
    changed = [c for c in unreported(verdicts, now) if c not in waiting]
    for customer in changed:
        yield check_evaluation(verdicts[customer], now.get(customer, Shown()).materialization)
    context.log.info(
        f"{len(changed)} of {len(customers)} verdict(s) reported: {changed[:20]}"
        + f"; {len(waiting)} wait for their champion move's materialization" * bool(waiting)
    )


@dg.job(
    name=JOB_NAME,
    description="Reports the serving_model_fresh verdicts that changed (requested by the "
    "serving_report sensor; a run, so a partition's every evaluation is stored).",
)
def serving_freshness_job() -> None:
    """One step: judge and report."""
    report_serving_freshness()
