"""Per-customer settings: defaults, overrides, and bad input refused with what and where."""

import pytest

from retrain_assets.cli import main
from retrain_assets.policy.thresholds import DEFAULTS, InvalidSetting, set_settings, settings_for


def test_a_customer_without_overrides_gets_the_defaults_and_overrides_are_per_value(db):
    assert settings_for(db, "acme") == DEFAULTS
    updated = set_settings(db, "acme", {"min_new_rows": 500}, "test")
    assert updated.min_new_rows == 500 and updated.schedule_days == DEFAULTS.schedule_days
    updated = set_settings(db, "acme", {"drift_threshold": 1.5}, "test")
    assert (updated.min_new_rows, updated.drift_threshold) == (500, 1.5)
    assert settings_for(db, "bolt") == DEFAULTS


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"schedule_days": 0}, "settings of acme: schedule_days = 0 is outside [1, 365]"),
        ({"drift_threshold": -1.0}, "settings of acme: drift_threshold = -1.0 is outside"),
        ({"min_history_days": 7}, "min_history_days = 7 is outside [8, 730]"),
        ({"min_history_days": 100}, "min_history_days = 100 exceeds window_days = 90"),
        ({"min_new_rows": 2.5}, "min_new_rows must be a whole number, not 2.5"),
        ({"speed": 3}, "unknown setting(s) ['speed']"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_setting(db, changes, message):
    with pytest.raises(InvalidSetting) as err:
        set_settings(db, "acme", changes, "test")
    assert message in str(err.value)
    assert settings_for(db, "acme") == DEFAULTS  # nothing half-stored


def test_an_unknown_customer_is_refused(db):
    with pytest.raises(InvalidSetting, match="unknown customer 'nobody'"):
        set_settings(db, "nobody", {"min_new_rows": 5}, "test")


def test_the_cli_sets_and_shows_settings_and_exits_2_on_bad_input(db, monkeypatch, capsys):
    monkeypatch.setenv("RETRAIN_APP_PG_URL", db)
    assert main(["policy", "set", "acme", "--min-new-rows", "700", "--schedule-days", "3"]) == 0
    assert "min_new_rows=700*" in capsys.readouterr().out
    assert main(["policy", "show"]) == 0
    shown = capsys.readouterr().out
    assert "acme: schedule_days=3* min_new_rows=700*" in shown
    assert "bolt: schedule_days=7 min_new_rows=1000 " in shown
    assert main(["policy", "set", "acme", "--window-days", "3"]) == 2
    assert "window_days = 3 is outside [8, 730]" in capsys.readouterr().err
    assert main(["policy", "set", "acme"]) == 2
    assert "give at least one setting" in capsys.readouterr().err
