"""The settings model: each kind of bad value refused naming variable, value and range.

`RetrainSettings` is the one place a RETRAIN_* variable is typed and bounded; these tests read
it through `current_settings()` as every accessor does, with the environment monkeypatched.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from retrain_assets.cli import main
from retrain_assets.settings_model import FIELDS, SettingsError, current_settings, env_name

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| `(?P<name>[A-Z_]+)` \| (?P<value>.*?) \| (?P<default>.*?) \| .* \|$")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test with no setting set: the model's defaults."""
    for name in os.environ:
        if name.startswith("RETRAIN_") or name == "MLFLOW_TRACKING_URI":
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("RETRAIN_POLL_INTERVAL_SECONDS", "0", "must be a whole number >= 1"),
        ("RETRAIN_GATE_WINDOWS", "four", "must be a whole number in [1, 52]"),
        ("RETRAIN_SERVE_MAX_ROWS", "2.5", "must be a whole number >= 1"),
        ("RETRAIN_GATE_CONFIDENCE", "1.5", "must be a number in [0.5, 0.999]"),
        ("RETRAIN_GATE_MARGIN", "1", "must be a number in [0, 1)"),
        ("RETRAIN_READY_TIMEOUT_SECONDS", "0", "must be a number > 0"),
        ("RETRAIN_SERVE_REFRESH_SECONDS", "inf", "must be a number > 0"),
        ("RETRAIN_WEBSERVER_PORT", "70000", "must be a whole number in [1, 65535]"),
        ("RETRAIN_TRAINING_BACKEND", "kubernetes", "must be one of reference, slurm"),
        ("RETRAIN_GPU_ALLOW_FAULTS", "maybe", "must be on or off"),
        ("RETRAIN_ROLLOUT_STEPS", "0.5,0.1", "(the weights do not increase)"),
        ("RETRAIN_INTERVAL_LEVELS", "80,80", "(level 80 is listed twice)"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable_the_value_and_the_range(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, said: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        current_settings()
    assert str(refused.value).startswith(f"{name}={value}: must be ")
    assert said in str(refused.value)


def test_a_rule_across_two_settings_names_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRAIN_RETRY_FIRST_SECONDS", "5")
    monkeypatch.setenv("RETRAIN_RETRY_MAX_SECONDS", "1")
    with pytest.raises(SettingsError) as refused:
        current_settings()
    assert str(refused.value) == (
        "RETRAIN_RETRY_MAX_SECONDS=1: must be >= RETRAIN_RETRY_FIRST_SECONDS (5)"
    )


def test_every_bad_value_is_named_in_one_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRAIN_POLL_INTERVAL_SECONDS", "0")
    monkeypatch.setenv("RETRAIN_CANARY_RULE", "coin")
    with pytest.raises(SettingsError) as refused:
        current_settings()
    assert str(refused.value) == (
        "RETRAIN_POLL_INTERVAL_SECONDS=0: must be a whole number >= 1; "
        "RETRAIN_CANARY_RULE=coin: must be one of wape, evidence"
    )


def test_blanks_are_unset_choices_ignore_case_and_an_empty_level_list_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RETRAIN_GATE_MARGIN", "  ")
    monkeypatch.setenv("RETRAIN_RUN_WORKERS", " ForkServer ")
    monkeypatch.setenv("RETRAIN_LANDING_AUTOMATION", "OFF")
    monkeypatch.setenv("RETRAIN_INTERVAL_LEVELS", "")
    settings = current_settings()
    assert settings.gate_margin == FIELDS["gate_margin"].default
    assert settings.run_workers == "forkserver"
    assert settings.landing_automation is False
    assert settings.interval_levels == ()


def test_a_changed_environment_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    first = current_settings()
    assert current_settings() is first  # one build per distinct environment
    monkeypatch.setenv("RETRAIN_GPU_SLOTS", "5")
    assert current_settings().gpu_slots == 5
    monkeypatch.delenv("RETRAIN_GPU_SLOTS")
    assert current_settings() is first


def test_the_documented_defaults_are_the_ones_the_code_resolves() -> None:
    rows = {
        match["name"]: match
        for line in (ROOT / "docs" / "configuration.md").read_text().splitlines()
        if (match := ROW.match(line))
    }
    assert set(rows) == {env_name(field) for field in FIELDS}
    settings = current_settings()  # nothing set: every value is its default
    for field in FIELDS:
        value = getattr(settings, field)
        default = rows[env_name(field)]["default"]
        if value is None:
            assert default.startswith("unset"), (field, default)
        elif isinstance(value, tuple):
            assert default == "`" + ",".join(f"{item:g}" for item in value) + "`", field
        elif isinstance(value, bool):
            assert default == ("`on`" if value else "`off`"), field
        elif isinstance(value, float):
            assert float(default.strip("`")) == value, field
        else:
            assert default == f"`{value}`", field


def test_the_command_line_refuses_a_bad_setting_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RETRAIN_POLL_INTERVAL_SECONDS", "0")
    assert main(["diagram", "training"]) == 2
    assert capsys.readouterr().err == (
        "retrain-assets diagram: RETRAIN_POLL_INTERVAL_SECONDS=0: must be a whole number >= 1\n"
    )
