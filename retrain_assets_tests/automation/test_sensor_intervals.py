"""Sensor intervals come from the environment when the code location is built, never at import."""

import importlib

import pytest

from retrain_assets.automation import gpu_job_poller, intervals
from retrain_assets.automation.intervals import POLL, interval_seconds
from retrain_assets.definitions import build_definitions
from retrain_assets.settings_model import SettingsError


def test_a_bad_interval_does_not_break_an_import_and_is_named_at_build(monkeypatch):
    monkeypatch.setenv(POLL.variable, "soon")
    importlib.reload(gpu_job_poller)  # importing reads nothing
    assert gpu_job_poller.gpu_job_poller.minimum_interval_seconds == POLL.default
    with pytest.raises(
        SettingsError, match="RETRAIN_POLL_INTERVAL_SECONDS=soon: must be a whole number >= 1"
    ):
        build_definitions()


def test_the_location_ticks_at_the_intervals_it_was_built_with(monkeypatch):
    monkeypatch.setenv(POLL.variable, "7")
    monkeypatch.setenv(intervals.ROLLOUT.variable, "9")
    defs = build_definitions()
    assert defs.resolve_sensor_def("gpu_job_poller").minimum_interval_seconds == 7
    assert defs.resolve_sensor_def("rollout_controller").minimum_interval_seconds == 9
    assert defs.resolve_sensor_def("retraining_policy").minimum_interval_seconds == 300


def test_unset_is_the_default_and_zero_is_refused(monkeypatch):
    monkeypatch.delenv(POLL.variable, raising=False)
    assert interval_seconds(POLL) == POLL.default == 180
    monkeypatch.setenv(POLL.variable, "0")
    with pytest.raises(SettingsError, match=f"{POLL.variable}=0: must be a whole number >= 1"):
        interval_seconds(POLL)
