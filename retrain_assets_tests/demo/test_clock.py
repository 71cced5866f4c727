import datetime as dt

import pytest

from retrain_assets.demo.clock import next_days, run_clock, tick
from retrain_assets.demo.pacing import pace
from retrain_assets.demo.simulate import land_tenant, landed_days, simulate_day
from retrain_assets.demo.tenants import DEMO_TENANTS, Regime, TenantSpec
from retrain_assets.deployment.records import auto_deploy_settings
from retrain_assets.policy.thresholds import all_settings
from retrain_assets.runtime.demo_mode import demo_day_seconds, demo_environment, start_demo
from retrain_assets.store.database import transaction

SMALL = (
    TenantSpec("one-us", "US", stores=1, items=2, seed=1),
    TenantSpec("two-de", "DE", stores=1, items=2, seed=2),
)


def test_each_tick_lands_the_next_day_of_every_tenant_and_never_after_yesterday(tmp_path):
    root = str(tmp_path)
    land_tenant(root, SMALL[0], [dt.date(2026, 3, 1), dt.date(2026, 3, 2)])
    land_tenant(root, SMALL[1], [dt.date(2026, 3, 1)])
    asked: list[tuple[str, dt.date]] = []

    landed = tick(
        root, dt.date(2026, 3, 2), lambda spec, day: asked.append((spec.name, day)), SMALL
    )

    assert landed == [("two-de", dt.date(2026, 3, 2))]  # one-us has caught up
    assert asked == landed  # the forecasts are asked for before the actuals land
    assert landed_days(root, "two-de")[-1] == dt.date(2026, 3, 2)
    assert next_days(root, dt.date(2026, 3, 2), SMALL) == []
    assert [d for _, d in next_days(root, dt.date(2026, 3, 5), SMALL)] == [dt.date(2026, 3, 3)] * 2


def test_a_regime_changes_demand_and_prices_only_inside_its_days():
    base = TenantSpec("reg-us", "US", stores=2, items=5, seed=4)
    shifted = TenantSpec(
        "reg-us",
        "US",
        stores=2,
        items=5,
        seed=4,
        regimes=(Regime(dt.date(2026, 5, 1), dt.date(2026, 5, 3), 3.0, price_factor=1.5),),
    )
    before, inside = dt.date(2026, 4, 30), dt.date(2026, 5, 2)
    assert simulate_day(base, before).equals(simulate_day(shifted, before))
    normal, festival = simulate_day(base, inside), simulate_day(shifted, inside)
    assert festival["units_sold"].sum() > 2 * normal["units_sold"].sum()
    assert (festival["price"] > normal["price"]).all()


def test_the_demo_history_is_unchanged_by_the_regimes_that_come_after_it():
    for spec in DEMO_TENANTS:
        for regime in spec.regimes:
            assert regime.first > dt.date(2026, 1, 1) + dt.timedelta(days=119)


def test_demo_settings_are_defaults_the_user_overrides(monkeypatch):
    monkeypatch.setenv("RETRAIN_DEMO_DAY_SECONDS", "0")
    assert demo_day_seconds() == 0
    monkeypatch.setenv("RETRAIN_DEMO_DAY_SECONDS", "-1")
    with pytest.raises(ValueError, match="RETRAIN_DEMO_DAY_SECONDS=-1: must be a number >= 0"):
        demo_day_seconds()
    env = demo_environment({"RETRAIN_POLL_INTERVAL_SECONDS": "60"}, on=True)
    assert env["RETRAIN_POLL_INTERVAL_SECONDS"] == "60"
    assert env["RETRAIN_POLICY_INTERVAL_SECONDS"] == "5"
    assert demo_environment({}, on=False) == {}


def test_the_first_demo_start_registers_each_tenant_with_its_demo_settings(
    app_db, tmp_path, monkeypatch
):
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RETRAIN_LANDING_URL", raising=False)
    said: list[str] = []
    assert start_demo(True, app_db, said.append)
    assert len(said) == len(DEMO_TENANTS)
    assert auto_deploy_settings(app_db) == {spec.name: True for spec in DEMO_TENANTS}
    assert all_settings(app_db)["lindenhof-de"].min_new_rows == 1_000_000
    assert start_demo(True, app_db, said.append)  # a later start: the marker keeps it on
    assert len(said) == len(DEMO_TENANTS)  # nothing landed twice
    assert not start_demo(False, app_db, said.append)  # --no-demo
    monkeypatch.setenv("RETRAIN_LANDING_URL", str(tmp_path / "elsewhere"))
    assert not start_demo(True, app_db, said.append)  # a real landing zone is never a demo


def publish(url: str, day: dt.date) -> None:
    with transaction(url) as cur:
        cur.execute(
            "INSERT INTO feature_snapshots (partition_date, data_version, feature_version,"
            " rows_per_customer, from_backfill, run_id) VALUES (%s, 'v', 'f', '{}', false, 'r')",
            (day,),
        )


def test_the_clock_stays_within_a_few_days_of_the_published_features(app_db, tmp_path):
    root = str(tmp_path)
    days = [dt.date(2026, 3, 1) + dt.timedelta(days=i) for i in range(5)]  # through March 5
    for spec in SMALL:
        land_tenant(root, spec, days)
    hold = pace(app_db, root, SMALL, ahead_days=3)
    assert "features published up to no day yet" in hold()
    publish(app_db, dt.date(2026, 3, 1))
    assert "days landed up to 2026-03-05, features published up to 2026-03-01" in hold()
    publish(app_db, dt.date(2026, 3, 2))
    assert hold() is None

    said: list[str] = []
    looks = iter(range(3))
    run_clock(
        root,
        0.01,
        lambda: next(looks, None) is None,
        said.append,
        hold=lambda: "waiting for the platform",
    )
    assert said == ["waiting for the platform"]  # said once, nothing landed
    assert landed_days(root, SMALL[0].name) == days
