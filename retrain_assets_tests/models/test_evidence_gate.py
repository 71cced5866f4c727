"""The gate says "not enough evidence" with the numbers (issue 31); errors say what failed."""

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from retrain_assets.features.evidence import EvidenceRules, judge_parts
from retrain_assets.models.gate import judge_candidate
from retrain_assets.models.handoff_errors import HandoffStepError, doing

D = dt.date(2026, 5, 1)
RULES = EvidenceRules(min_train_rows=28, min_holdout_rows=7, min_holdout_rows_per_store=1)


def part(days, stores, start):
    return pd.DataFrame(
        [
            {"customer": "acme", "store_id": s, "date": pd.Timestamp(start + dt.timedelta(days=i))}
            for i in range(days)
            for s in stores
            for _ in range(3)
        ]
    )


def never_called(frame: pd.DataFrame) -> np.ndarray:
    raise AssertionError("a window without evidence must not be scored")


def test_a_holdout_of_one_store_is_not_enough_evidence_never_a_pass():
    train = part(20, ["s1", "s2"], D)
    holdout = part(7, ["s1"], D + dt.timedelta(days=20))
    evidence = judge_parts("acme", train, holdout, RULES)
    outcome = judge_candidate(holdout, never_called, None, 0.02, evidence=evidence)
    assert not outcome.verdict.passed
    assert outcome.verdict.reason == (
        "not enough evidence: holdout 2026-05-21 .. 2026-05-27 has too few rows for 1 of 2 "
        "store(s) (s2: 0; needs >= 1 each)"
    )
    assert outcome.metadata["rows_scored"] == 0
    assert outcome.metadata["stores_in_holdout"] == "1 of 2"


def test_an_empty_holdout_is_not_enough_evidence_with_its_numbers():
    train = part(20, ["s1"], D)
    empty = train.iloc[0:0]
    evidence = judge_parts("acme", train, empty, RULES)
    outcome = judge_candidate(empty, never_called, None, 0.02, evidence=evidence)
    assert not outcome.verdict.passed
    assert outcome.verdict.reason.startswith(
        "not enough evidence: holdout 2026-05-21 .. 2026-05-21 has 0 rows of acme (needs >= 7)"
    )


def test_a_failing_step_says_what_for_whom_and_on_what_window():
    window = "2026-02-20 .. 2026-05-20"
    with (
        pytest.raises(HandoffStepError) as raised,
        doing("scoring the candidate", "acme", "k1", window),
    ):
        raise ValueError("Input data must be 2 dimensional and non empty.")
    assert str(raised.value) == (
        "scoring the candidate for acme, run key k1, snapshot 2026-02-20 .. 2026-05-20: "
        "ValueError: Input data must be 2 dimensional and non empty."
    )
    assert isinstance(raised.value.__cause__, ValueError)


def test_the_gate_in_a_candidate_run_answers_not_enough_evidence(model_world):
    """A holdout that lost a store after export: the gate's verdict, recorded, is a fail."""
    from retrain_assets.features.parquet_store import PartitionStorage
    from retrain_assets.features.training_export import export_folder, read_holdout
    from retrain_assets.machines.store import pointer
    from retrain_assets.models.gate_results import latest_gate_result
    from retrain_assets.models.training_job_asset import training_job
    from retrain_assets.registry.mlflow_registry import MlflowRegistry
    from retrain_assets_tests.models.flow import (
        CUSTOMER,
        execute,
        materialize,
        poll_until_requested,
        train_config,
    )

    instance, db = model_world.instance, model_world.db
    submitted = materialize(instance, [training_job], train_config())
    key = submitted.asset_materializations_for_node("training_job")[0].metadata["run_key"].value
    request = poll_until_requested(instance, seconds=120)
    store = PartitionStorage().store()
    holdout = read_holdout(store, CUSTOMER, key)
    kept = holdout[holdout["store_id"] == holdout["store_id"].min()]
    with (export_folder(store, CUSTOMER, key) / "holdout.parquet").open("wb") as handle:
        kept.reset_index(drop=True).to_parquet(handle, index=False)
    result = execute(instance, request)
    assert result.asset_materializations_for_node("registered_model") == []  # blocked
    verdict = latest_gate_result(db, key)
    assert verdict is not None and not verdict.passed
    assert verdict.reason.startswith(
        "not enough evidence: holdout 2025-02-13 .. 2025-02-19 has too few rows for 1 of 2 "
        "store(s) ("
    )
    assert verdict.rows_scored == 0
    assert MlflowRegistry(model_world.mlflow_uri).versions_of(CUSTOMER, key) == []
    assert pointer(db, "training", CUSTOMER).state == "DONE"  # gate failed, run complete
