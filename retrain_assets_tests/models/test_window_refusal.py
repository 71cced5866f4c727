"""Bad windows (issue 31): each refused by `training_job` before submitting, with the numbers.

A window in the future, a window of one day, a customer with zero published rows, a holdout
with rows for only one store: no GPU job, no export, no candidate; the refusals of a window
that exists are a recorded transition of the training machine (INITIAL -> FAILED).
"""

import datetime as dt

import pandas as pd
from upath import UPath

from retrain_assets.customers import CUSTOMERS
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.features.training_export import export_folder
from retrain_assets.machines.store import history, pointer
from retrain_assets.models.training_job_asset import training_job
from retrain_assets_tests.models.flow import CUSTOMER, materialize, train_config
from retrain_assets_tests.models.world import DAYS, START
from retrain_assets_tests.support.in_process import publish_feature_range


def refusal(world, customer: str, **config) -> str:
    """Materialize training_job; return the step's error, which must be a refusal."""
    result = materialize(
        world.instance, [training_job], train_config(**config), False, customer=customer
    )
    assert not result.success
    return result.get_step_failure_events()[0].step_failure_data.error.to_string()


def refused_by_the_machine(world, customer: str) -> tuple[str, str]:
    """Check nothing was spent; return the run key and the machine's reason."""
    p = pointer(world.db, "training", customer)
    assert (p.state, p.status) == ("FAILED", "terminal")
    assert p.reason.startswith("window refused before any GPU job: not enough evidence: ")
    rows = history(world.db, "training", customer)
    assert [(h.state, h.ok, h.next_state) for h in rows] == [("INITIAL", False, "FAILED")]
    assert world.service.client().find(p.run_key) is None  # no GPU job
    store = PartitionStorage().store()
    assert not UPath(export_folder(store, customer, p.run_key)).exists()  # nothing exported
    return p.run_key, p.reason


def published_then_refused(world, customer: str, days: list[dt.date]) -> str:
    """Add the customer, publish `days`, launch its training; return the machine's reason."""
    world.instance.add_dynamic_partitions(CUSTOMERS.name, [customer])
    publish_feature_range(world.instance, days[0], days[-1])
    refusal(world, customer)
    return refused_by_the_machine(world, customer)[1]


def test_a_window_in_the_future_is_refused_before_anything_starts(model_world):
    error = refusal(model_world, CUSTOMER, first_day="2025-03-01", last_day="2025-03-20")
    assert (
        "20 day(s) of store_day_features are not published (2025-03-01 .. 2025-03-20; "
        "published: 2025-01-01 .. 2025-02-19)"
    ) in error
    assert pointer(model_world.db, "training", CUSTOMER) is None  # no run was started


def test_a_window_of_one_day_is_refused_with_its_numbers(model_world):
    error = refusal(model_world, CUSTOMER, first_day="2025-02-19", last_day="2025-02-19")
    _, reason = refused_by_the_machine(model_world, CUSTOMER)
    assert "window 2025-02-19 .. 2025-02-19 has 1 day(s), no training days before its 7-day " in (
        reason
    )
    assert "training part 2025-02-19 .. 2025-02-12 has 0 rows of alpha-us (needs >= 28)" in reason
    assert "the latest window that could be judged: 2025-01-01 .. 2025-02-19" in reason
    assert "WindowRefused" in error and reason in error


def test_a_customer_with_zero_published_rows_is_refused(model_world):
    model_world.instance.add_dynamic_partitions(CUSTOMERS.name, ["ghost-us"])
    refusal(model_world, "ghost-us")
    _, reason = refused_by_the_machine(model_world, "ghost-us")
    assert "holdout 2025-02-13 .. 2025-02-19 has 0 rows of ghost-us (needs >= 7)" in reason
    assert "ghost-us has no rows in 2025-01-01 .. 2025-02-19" in reason
    assert "no published window of up to 90 days holds enough of ghost-us's rows (0 published" in (
        reason
    )


def test_a_holdout_with_rows_for_only_one_store_is_refused(model_world):
    spec = TenantSpec("mono-us", "US", stores=2, items=3, seed=4)
    landing = model_world.home / "landing"
    days = [START + dt.timedelta(days=i) for i in range(DAYS)]
    land_tenant(str(landing), spec, days)
    for day in days[-7:]:  # store S002 sends nothing in the last week
        path = landing / spec.name / f"{day.isoformat()}.csv"
        frame = pd.read_csv(path)
        frame[frame["store_id"] != "S002"].to_csv(path, index=False)
    reason = published_then_refused(model_world, spec.name, days)
    assert (
        "holdout 2025-02-13 .. 2025-02-19 has too few rows for 1 of 2 store(s) (S002: 0; "
        "needs >= 1 each)"
    ) in reason
    # judged on its rows too, not only on its counts per day (which would name the same window)
    assert reason.endswith("; the latest window that could be judged: 2025-01-01 .. 2025-02-18")


def test_the_evidence_gate_refuses_a_one_store_customer_before_any_gpu_job(
    model_world, monkeypatch
):
    # enough rows for the margin gate, but the evidence gate's bootstrap needs two stores: its
    # own check answers before a GPU job is spent, not after
    monkeypatch.setenv("RETRAIN_GATE_RULE", "evidence")
    spec = TenantSpec("solo-us", "US", stores=1, items=3, seed=5)
    days = [START + dt.timedelta(days=i) for i in range(DAYS)]
    land_tenant(str(model_world.home / "landing"), spec, days)
    reason = published_then_refused(model_world, spec.name, days)
    assert (
        "not enough evidence: the evidence gate (RETRAIN_GATE_RULE=evidence) would answer: the "
        "holdout has 1 store(s) with rows; a bootstrap over one store's 7 days cannot speak for a "
        "customer (needs >= 2); no window of solo-us can be judged by the evidence gate while its "
        "rows come from 1 store(s) (needs >= 2)"
    ) in reason


def test_the_evidence_gate_refuses_a_holdout_shorter_than_its_windows(model_world, monkeypatch):
    # two 7-day windows, the customer's rows stop 3 days before the window ends: the 14-day
    # holdout holds plenty of rows, but the gate's windows end on its newest day with rows
    monkeypatch.setenv("RETRAIN_GATE_RULE", "evidence")
    monkeypatch.setenv("RETRAIN_GATE_WINDOWS", "2")
    spec = TenantSpec("late-us", "US", stores=2, items=3, seed=6)
    days = [START + dt.timedelta(days=i) for i in range(DAYS)]
    land_tenant(str(model_world.home / "landing"), spec, days[:-3])
    reason = published_then_refused(model_world, spec.name, days)
    assert (
        "not enough evidence: the evidence gate (RETRAIN_GATE_RULE=evidence) would answer: the "
        "holdout 2025-02-06 .. 2025-02-16 is shorter than 2 window(s) of 7 days (from 2025-02-03)"
    ) in reason
