"""Browser fixtures: one Chromium per session, a fresh page per journey, the shared platform."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

from retrain_assets_tests.support.platform import RunningPlatform
from retrain_assets_tests.ui.browser import VIEWPORT, Journey, journey_folder, launch_chromium

SEEN_COMMUNITY_NOTE = "mutation { setNuxSeen }"


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, headless, for every browser test of the session."""
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def ui_platform(shared_platform: RunningPlatform) -> RunningPlatform:
    """The shared platform, its UI told that the community sign-up note was seen.

    Dagster's UI opens that note over any page a second after it loads when the webserver
    runs on localhost; a person dismisses it once and so does this fixture (the same call
    as its Skip button), so no journey's clicks land on it.
    """
    assert shared_platform.graphql(SEEN_COMMUNITY_NOTE)["setNuxSeen"] is True
    return shared_platform


@pytest.fixture
def journey(
    chromium: Browser, ui_platform: RunningPlatform, request: pytest.FixtureRequest
) -> Iterator[Journey]:
    """A fresh browser page on the platform's UI and this test's screenshots folder."""
    folder = journey_folder(request.node.name)
    print(f"screenshots of {request.node.name}: {folder}")
    context = chromium.new_context(viewport=VIEWPORT)
    try:
        page = Journey(context.new_page(), f"http://127.0.0.1:{ui_platform.port}", folder)
        yield page
        page.save_page("last")
    finally:
        context.close()
