"""What an ML engineer clicks in Dagster 1.13's UI, as steps a journey can take.

Selectors are the UI's visible words and roles (button names, placeholders, titles), found by
reading the pages' DOM; they are kept here, one place to update when Dagster's UI changes.
"""

from __future__ import annotations

import re
import time

from playwright.sync_api import Locator

from retrain_assets_tests.ui.browser import Journey

RUN_ID = re.compile(r"/runs/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")
PAGE_SECONDS = 60  # a page or dialog rendering on a busy machine


def open_asset(journey: Journey, asset: str, query: str = "") -> None:
    """Open an asset's page and wait until its content has loaded."""
    journey.open(f"/assets/{asset}{query}")
    journey.wait_visible(
        journey.page.get_by_role("heading", name=asset).or_(
            journey.page.get_by_text(asset, exact=True)
        ),
        PAGE_SECONDS,
        f"the page of {asset}",
    )


def open_materialize_dialog(journey: Journey, asset: str) -> Locator:
    """Open an asset's page, click "Materialize…" and return the launch dialog."""
    open_asset(journey, asset)
    page = journey.page
    journey.wait_visible(
        page.get_by_text("Latest materialization"), PAGE_SECONDS, f"{asset}'s status"
    )
    page.get_by_role("button", name="Materialize…").click()
    dialog = page.get_by_role("dialog")
    journey.wait_visible(
        dialog.get_by_text("Partition selection"), PAGE_SECONDS, "the materialize dialog"
    )
    return dialog


def open_job_launchpad(journey: Journey, job: str) -> None:
    """Open a job's own launchpad (`/locations/retrain_assets/jobs/<job>/playground`).

    Only this launchpad runs the whole job. Dagster 1.13's other ways to launch an asset job
    from its page (Materialize…, and the asset launchpad behind the arrow beside it) launch
    the job's assets with their own checks only: deploy_model's blocking check on
    registered_model would not run, and deployment_decision refuses (seen in this journey).
    """
    journey.open(f"/locations/retrain_assets/jobs/{job}/playground")
    journey.wait_visible(
        journey.page.get_by_placeholder("Partition"),
        PAGE_SECONDS,
        f"{job}'s launchpad partition box",
    )


def launch_from_launchpad(journey: Journey, partition: str) -> str:
    """Choose `partition` in the open launchpad, click "Launch Run"; return the run's id."""
    page = journey.page
    box = page.get_by_placeholder("Partition")
    option = page.get_by_role("menuitem").filter(has=page.get_by_text(partition, exact=True))
    typed_at = [0.0]

    def offered() -> bool:
        # Under load the launchpad re-renders once its partitions and config have loaded, and
        # what was typed before can vanish (seen in CI: an empty box, nothing offered for
        # 240 s). Type again whenever the box no longer holds the name, or nothing showed
        # for 10 s (the drop-down closed).
        if option.first.is_visible():
            return True
        if box.input_value() != partition or time.monotonic() - typed_at[0] > 10:
            box.click()
            box.press("Control+a")
            page.keyboard.type(partition)
            typed_at[0] = time.monotonic()
        return option.first.is_visible()

    journey.wait_for(offered, PAGE_SECONDS, f"{partition} offered")
    option.first.click()
    launch = page.get_by_role("button", name="Launch Run")
    journey.wait_for(launch.is_enabled, PAGE_SECONDS, "Launch Run enabled (the config loaded)")
    journey.shot(f"{partition} chosen in the launchpad")
    launch.click()

    def shown_run() -> re.Match | None:
        # the UI moves to the run with history.pushState, which page.url does not always see
        return RUN_ID.search(page.evaluate("() => window.location.pathname"))

    journey.wait_for(shown_run, PAGE_SECONDS, "the launched run's page")
    found = shown_run()
    assert found, "the launched run's page moved away"
    return found.group(1)


def choose_day_range(journey: Journey, dialog: Locator, first: str, last: str, count: int) -> None:
    """Type a range of daily partitions into the dialog (all time, not only the last 90 days)."""
    all_time = dialog.get_by_role("button", name="All time")
    show_all = dialog.get_by_text("Show all partitions")
    journey.wait_visible(all_time.or_(show_all), PAGE_SECONDS, "the partition range picker")
    if show_all.is_visible():
        show_all.click()
        journey.wait_visible(all_time, PAGE_SECONDS, "all partitions shown")
    box = dialog.get_by_role("textbox").first
    box.fill(f"[{first}...{last}]")
    box.press("Enter")
    journey.wait_visible(
        dialog.get_by_text(f"{count} partitions", exact=True),
        PAGE_SECONDS,
        f"{count} partitions selected",
    )


def choose_partition(journey: Journey, dialog: Locator, partition: str) -> None:
    """Pick one partition of a dynamically partitioned asset in the dialog."""
    page = journey.page
    dialog.get_by_text("Select a partition or create one").click()
    page.keyboard.type(partition)
    option = page.get_by_role("menuitem").filter(has=page.get_by_text(partition, exact=True))
    journey.wait_visible(option, PAGE_SECONDS, f"{partition} offered").click()
    dialog.get_by_text("Launch runs to materialize").click()  # closes the drop-down
    journey.wait_visible(
        dialog.get_by_text("1 partition", exact=True), PAGE_SECONDS, f"{partition} selected"
    )


def launch_backfill(journey: Journey, dialog: Locator) -> str:
    """Click "Launch backfill"; return the backfill id the UI reports."""
    dialog.get_by_role("button", name="Launch backfill").click()
    confirmation = journey.read_when_shown(
        journey.page.get_by_text(re.compile(r"Created backfill \w+")),
        PAGE_SECONDS,
        "the backfill's confirmation",
    )
    return confirmation.split()[-1]


def launch_one_run(journey: Journey, dialog: Locator) -> str:
    """Click "Launch 1 run", then open that run from the Runs page; return the run's id.

    The confirmation names the run by its short id and fades in seconds, too soon to click
    its View button reliably on a busy machine; the Runs page lists the run by that id.
    """
    page = journey.page
    dialog.get_by_role("button", name="Launch 1 run").click()
    confirmation = journey.read_when_shown(
        page.get_by_text(re.compile(r"Launched run \w+")), PAGE_SECONDS, "the run's confirmation"
    )
    short_id = confirmation.split()[-1]
    journey.open("/runs")
    journey.wait_visible(
        page.get_by_role("link", name=short_id), PAGE_SECONDS, f"run {short_id} on the Runs page"
    ).click()
    journey.wait_for(lambda: RUN_ID.search(page.url), PAGE_SECONDS, "the run's page")
    run_id = RUN_ID.search(page.url).group(1)
    assert run_id.startswith(short_id), (run_id, short_id)
    return run_id


def open_run(journey: Journey, run_id: str) -> None:
    """Open a run's page."""
    journey.open(f"/runs/{run_id}")


def run_status(journey: Journey) -> str:
    """Return the status tag of the open run page ("Success", "Failure", ...), or ""."""
    tag = journey.page.locator(".BaseTag").filter(
        has=journey.page.locator("[role=img][aria-label^='run_']")
    )
    return " ".join(tag.all_inner_texts()[:1])


def follow_run(journey: Journey, run_id: str, seconds: float) -> None:
    """Stay on the run's page until it shows Success; fail at once on Failure or Canceled."""
    journey.wait_until_text(
        lambda: run_status(journey),
        "Success",
        ("Failure", "Canceled"),
        seconds,
        f"run {run_id} succeeding",
    )


def backfill_status(journey: Journey) -> str:
    """Return the Status field of the open backfill page ("In progress", "Succeeded", ...)."""
    label = journey.page.get_by_text("Status", exact=True)
    return " ".join(label.locator("xpath=..").all_inner_texts()[:1])


def follow_backfill(journey: Journey, backfill_id: str, seconds: float) -> None:
    """Open the backfill's page and stay until it shows Succeeded; fail on Failed/Canceled."""
    journey.open(f"/runs/b/{backfill_id}")
    journey.wait_until_text(
        lambda: backfill_status(journey),
        "Succeeded",
        ("Failed", "Canceled"),
        seconds,
        f"backfill {backfill_id} finishing",
    )


def check_partition_detail(journey: Journey, asset: str, check: str, partition: str) -> Locator:
    """Open an asset check's Partitions tab, pick `partition` and return its detail pane."""
    page = journey.page
    open_asset(journey, asset, "?view=checks")
    page.get_by_text(check, exact=True).first.click()
    journey.wait_visible(page.get_by_text("Latest execution"), PAGE_SECONDS, f"{check}")
    page.get_by_text("Partitions", exact=True).last.click()
    journey.wait_visible(
        page.get_by_placeholder("Filter by partition"), PAGE_SECONDS, f"{check}'s partitions"
    ).fill(partition)
    # a long name is truncated in the middle on screen; its title attribute is whole
    page.get_by_title(partition, exact=True).last.click()
    pane = (
        page.locator("div")
        .filter(has=page.get_by_text("View all historical executions"))
        .filter(has=page.get_by_title(partition, exact=True))
        .last
    )
    journey.wait_visible(
        pane.get_by_text("Description", exact=True), PAGE_SECONDS, f"{check} of {partition}"
    )
    return pane


def partition_detail(journey: Journey, asset: str, partition: str) -> Locator:
    """Open an asset's Partitions tab on `partition`; return its detail pane once materialized."""
    page = journey.page
    open_asset(journey, asset, f"?view=partitions&partition={partition}")
    pane = (
        page.locator("div")
        .filter(has=page.get_by_text(re.compile(r"View all historical events")))
        .filter(
            has=page.get_by_title(partition, exact=True).or_(
                page.get_by_text(partition, exact=True)
            )
        )
        .last
    )
    journey.wait_visible(
        pane.get_by_text("Materialized", exact=True),
        PAGE_SECONDS,
        f"{asset} {partition} materialized",
    )
    return pane


VERDICT_TAG = re.compile(r"^(Passed|Failed|Execution failed|Skipped)$")


def verdict_tag(pane: Locator) -> str:
    """Return the status tag of a check's partition pane: Passed, Failed, Execution failed..."""
    return pane.locator("span[data-tooltip]").filter(has_text=VERDICT_TAG).first.inner_text()


def freshness_detail(journey: Journey, partition: str) -> Locator:
    """Open deployed_model's serving_model_fresh check on `partition`; return its detail pane."""
    return check_partition_detail(journey, "deployed_model", "serving_model_fresh", partition)


def sensor_ticks(journey: Journey, sensor: str, expected: str) -> str:
    """Open a sensor's page (from the Automation page) until its tick history shows `expected`;
    return the page's text (the ticks' statuses and skip reasons)."""
    page = journey.page
    journey.open("/automation")
    journey.wait_visible(page.get_by_text(sensor, exact=True), PAGE_SECONDS, f"{sensor} listed")
    journey.open(f"/locations/retrain_assets/sensors/{sensor}")
    journey.wait_visible(page.get_by_text(expected).first, PAGE_SECONDS, f"{sensor}: {expected}")
    return page.locator("body").inner_text()
