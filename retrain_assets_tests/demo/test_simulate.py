import datetime as dt

import pytest

from retrain_assets.cli import main
from retrain_assets.demo.simulate import days_to_land, landed_days, simulate_day
from retrain_assets.demo.tenants import DEMO_TENANTS

SPEC = DEMO_TENANTS[0]


def test_a_day_is_a_pure_function_of_tenant_and_date():
    day = dt.date(2026, 3, 3)
    assert simulate_day(SPEC, day).equals(simulate_day(SPEC, day))
    assert not simulate_day(SPEC, day).equals(simulate_day(SPEC, day + dt.timedelta(days=1)))


def test_sales_look_like_retail():
    frame = simulate_day(SPEC, dt.date(2026, 3, 7))
    assert len(frame) == SPEC.stores * SPEC.items
    assert (frame["units_sold"] >= 0).all() and (frame["stock_on_hand"] >= 0).all()
    promo = frame[frame["on_promo"] == 1]
    assert len(promo) > 0
    saturday = simulate_day(SPEC, dt.date(2026, 3, 7))["units_sold"].sum()
    tuesday = simulate_day(SPEC, dt.date(2026, 3, 3))["units_sold"].sum()
    assert saturday > tuesday  # weekly seasonality
    july_4 = simulate_day(SPEC, dt.date(2026, 7, 4))["units_sold"].sum()
    july_11 = simulate_day(SPEC, dt.date(2026, 7, 11))["units_sold"].sum()
    assert july_4 > july_11  # a US public holiday lifts demand


def test_new_tenant_gets_history_and_later_calls_land_the_next_days():
    latest = dt.date(2026, 12, 1)
    history = days_to_land([], None, None, latest)
    assert len(history) == 120 and history[0] == dt.date(2026, 1, 1)
    assert days_to_land(history, 3, None, latest) == [
        history[-1] + dt.timedelta(days=i) for i in (1, 2, 3)
    ]
    with pytest.raises(ValueError, match="finished days"):
        days_to_land(history, 400, None, latest)


def test_cli_lands_files_per_customer(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path))
    assert main(["simulate", "--days", "3", "--start", "2026-02-01"]) == 0
    root = str(tmp_path / "landing")
    for spec in DEMO_TENANTS:
        assert landed_days(root, spec.name) == [dt.date(2026, 2, d) for d in (1, 2, 3)]
    assert main(["simulate", "--days", "1"]) == 0
    assert landed_days(root, SPEC.name)[-1] == dt.date(2026, 2, 4)
    assert main(["simulate", "--days", "100000"]) == 2
    assert "finished days" in capsys.readouterr().err
