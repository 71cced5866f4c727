"""Debian's Chromium under Playwright, and a journey: one page plus the screenshots it keeps.

`playwright install` downloads a browser build, which this project's machines cannot fetch;
the Makefile installs Debian's `chromium` package instead and the tests launch that binary.
Without it the tests fail and say so: a browser test that skips is a test that never runs.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, Playwright
from playwright.sync_api import Error as PlaywrightError

from retrain_assets_tests.support.waiting import patience, wait_until

CHROMIUM = "/usr/bin/chromium"
# --disable-background-networking and friends: Chromium's own calls home are refused on a
# closed network, and without these flags that refusal breaks its loopback connections too.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 900}
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def chromium_path() -> str:
    """Return the Chromium binary to drive; fail (never skip) with the fix when it is missing."""
    path = os.environ.get("RETRAIN_CHROMIUM", CHROMIUM)
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"no Chromium at {path}: the browser tests need Debian's chromium package; "
            "`make test` installs it (apt-get install -y chromium), or set RETRAIN_CHROMIUM"
        )
    return path


def launch_chromium(playwright: Playwright) -> Browser:
    """Start headless Chromium from the system package."""
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)


def artifacts_root() -> Path:
    """Return where journeys keep their screenshots (RETRAIN_UI_ARTIFACTS, else ui/artifacts)."""
    return Path(os.environ.get("RETRAIN_UI_ARTIFACTS", ARTIFACTS))


class Journey:
    """One test's browser page on the platform's UI, with a numbered screenshot per step.

    Every wait polls what the page shows and, when its deadline passes, saves the page (PNG
    and HTML) before failing, so a red build shows where the journey stopped.
    """

    def __init__(self, page: Page, base_url: str, folder: Path) -> None:
        self.page, self.base_url, self.folder = page, base_url, folder
        self.steps: list[Path] = []
        page.set_default_timeout(patience(30) * 1000)

    def open(self, path: str) -> None:
        """Go to a path of the UI (e.g. `/assets/sales`)."""
        self.page.goto(self.base_url + path)

    def shot(self, step: str) -> Path:
        """Save a screenshot of the page as the next numbered step; return its path."""
        name = re.sub(r"[^a-z0-9]+", "-", step.lower()).strip("-")
        path = self.folder / f"{len(self.steps) + 1:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        self.steps.append(path)
        return path

    def save_page(self, name: str) -> str:
        """Save the page as PNG and HTML under `name`; return a line saying where."""
        png, html = self.folder / f"{name}.png", self.folder / f"{name}.html"
        try:
            self.page.screenshot(path=str(png), full_page=True)
            html.write_text(self.page.content())
        except PlaywrightError as error:  # the page itself may be what broke: say so
            return f"(could not save the page: {error})"
        return f"the page as it was: {png} and {html}"

    def wait_for(self, condition: Callable[[], object], seconds: float, what: str) -> None:
        """Wait until `condition()` holds, as `wait_until` does; save the page if it never does."""
        wait_until(condition, seconds, what, detail=lambda: self.save_page("timed-out"))

    def wait_visible(self, locator: Locator, seconds: float, what: str) -> Locator:
        """Wait until `locator` is on screen (the first match); return it."""
        self.wait_for(lambda: locator.first.is_visible(), seconds, what)
        return locator.first

    def read_when_shown(self, locator: Locator, seconds: float, what: str) -> str:
        """Wait until `locator` matches something; return its text at once (toasts fade)."""
        texts: list[str] = []

        def shown() -> bool:
            texts[:] = locator.all_inner_texts()
            return bool(texts)

        self.wait_for(shown, seconds, what)
        return texts[0]

    def wait_until_text(
        self, read: Callable[[], str], good: str, bad: tuple[str, ...], seconds: float, what: str
    ) -> str:
        """Wait until `read()` (text on the page) contains `good`; fail at once on a `bad` one."""
        seen = {"text": ""}

        def settled() -> bool:
            seen["text"] = read()
            for word in bad:
                if word in seen["text"]:
                    pytest.fail(f"{what}: the page shows {word!r}\n{self.save_page('failed')}")
            return good in seen["text"]

        def detail() -> str:
            return f"last seen: {seen['text']!r}\n{self.save_page('timed-out')}"

        wait_until(settled, seconds, what, detail=detail)
        return seen["text"]


def journey_folder(test_name: str) -> Path:
    """Return an empty screenshots folder for one test (earlier runs' pictures removed)."""
    folder = artifacts_root() / re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.is_file():
            old.unlink()
    return folder


@contextlib.contextmanager
def journey_on(browser: Browser, port: int, test_name: str) -> Iterator[Journey]:
    """Open a fresh page on the UI at `port` with the test's screenshots folder; save it last."""
    folder = journey_folder(test_name)
    print(f"screenshots of {test_name}: {folder}")
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = Journey(context.new_page(), f"http://127.0.0.1:{port}", folder)
        yield page
        page.save_page("last")
    finally:
        context.close()
