"""The shared platform stops after the last of its tests in a row, and only then."""

from types import SimpleNamespace

import pytest

from retrain_assets_tests.support.early_stop import SharedPlatformLife


class FakePlatform:
    """Stands in for a running `up`: counts its stops."""

    def __init__(self, code: int = 0) -> None:
        self.stops, self.code = 0, code
        self.output = SimpleNamespace(read_text=lambda: "up's output")

    def stop(self) -> int:
        self.stops += 1
        return self.code


def fake_item(uses_platform: bool) -> SimpleNamespace:
    """A test item as far as the hooks look at it: its fixture names."""
    names = ("shared_platform", "tmp_path") if uses_platform else ("tmp_path",)
    return SimpleNamespace(fixturenames=names)


def test_it_stops_when_the_next_test_does_not_use_it_and_refuses_a_late_user():
    platform = FakePlatform()
    life = SharedPlatformLife(platform=platform)  # type: ignore[arg-type]
    first, second, other = fake_item(True), fake_item(True), fake_item(False)
    life.stop_after(first, second)  # the next one still needs it
    assert platform.stops == 0 and not life.stopped_early
    life.stop_after(other, first)  # a test that never used it ends nothing
    assert platform.stops == 0
    life.stop_after(second, other)
    assert platform.stops == 1 and life.stopped_early
    life.stop_after(second, None)  # once
    assert platform.stops == 1
    life.refuse_if_stopped(other)  # others go on
    with pytest.raises(pytest.fail.Exception, match="stopped after the last of its tests"):
        life.refuse_if_stopped(fake_item(True))


def test_the_last_test_of_the_worker_stops_it_and_an_unclean_stop_fails():
    platform = FakePlatform(code=1)
    life = SharedPlatformLife(platform=platform)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="up exited 1"):
        life.stop_after(fake_item(True), None)
    assert platform.stops == 1


def test_without_a_shared_platform_nothing_happens():
    life = SharedPlatformLife()
    life.stop_after(fake_item(True), None)
    assert not life.stopped_early
