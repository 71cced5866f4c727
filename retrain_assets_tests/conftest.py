from collections.abc import Iterator

import dagster as dg
import pytest
from playwright.sync_api import Browser, sync_playwright
from xdist.workermanage import WorkerController

from retrain_assets.store.server import (
    PostgresServer,
    ensure_database,
    start_server,
    stop_embedded_server,
)
from retrain_assets_tests.support.databases import (
    DatabasePool,
    Slot,
    make_pool,
    postgres_storage,
    skip_durability,
    stop_without_checkpoint,
)
from retrain_assets_tests.support.early_stop import SHARED_PLATFORM_LIFE
from retrain_assets_tests.support.mlflow_server import running_mlflow
from retrain_assets_tests.support.platform import RunningPlatform, running_platform
from retrain_assets_tests.support.platform_ledger import (
    LEDGER,
    WORKER_OUTPUT_KEY,
    PlatformEntry,
    entries_from_json,
    print_summary,
)
from retrain_assets_tests.support.stop_signals import restore_stop_signals
from retrain_assets_tests.support.worker_groups import assign_groups, check_groups_reached_xdist
from retrain_assets_tests.support.worker_timeline import WorkerTimeline, print_timeline
from retrain_assets_tests.ui.browser import Journey, journey_on, launch_chromium

SHARED_PLATFORM_ENV = {
    "RETRAIN_POLL_INTERVAL_SECONDS": "2",
    # the retraining policy is left to the tests that start a platform of their own
    "RETRAIN_POLICY_INTERVAL_SECONDS": "3600",
    "RETRAIN_GPU_ALLOW_FAULTS": "1",
    # rollouts (retrain_assets_tests/deployment): steps of seconds, judged on a few dozen rows
    "RETRAIN_ROLLOUT_INTERVAL_SECONDS": "2",
    "RETRAIN_ROLLOUT_STEP_SECONDS": "6",
    "RETRAIN_ROLLOUT_MIN_PREDICTIONS": "20",
    "RETRAIN_ROLLOUT_MIN_ACTUALS": "20",
    "RETRAIN_ROLLOUT_MAX_NO_DATA_INTERVALS": "300",
    "RETRAIN_DEPLOY_CHECK_DAYS": "3",
    "RETRAIN_SERVING_REPORT_INTERVAL_SECONDS": "2",
    # tests here publish their days by hand; the landing automation has a platform of its own
    "RETRAIN_LANDING_AUTOMATION": "off",
    # retries wait 2, 4, 8, 8 s (issue 31): a download budget of 5 spans ~22 s, not minutes
    "RETRAIN_RETRY_FIRST_SECONDS": "2",
    "RETRAIN_RETRY_MAX_SECONDS": "8",
}


def pytest_configure(config: pytest.Config) -> None:
    """Let SIGTERM stop what the tests start, even when pytest runs as a background job."""
    restore_stop_signals()  # support/stop_signals.py says why


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group the tests for `make test`'s workers, longest groups first (support/worker_groups)."""
    assign_groups(items)


@pytest.hookimpl(trylast=True)  # after the test's own fixtures (module ones included) ended
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared platform after the last of its tests in a row (support/early_stop)."""
    SHARED_PLATFORM_LIFE.stop_after(item, nextitem)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Refuse a shared platform test that comes after the platform's early stop."""
    SHARED_PLATFORM_LIFE.refuse_if_stopped(item)


def pytest_xdist_node_collection_finished(node: WorkerController, ids: list[str]) -> None:
    """Refuse to run `--dist loadgroup` when a worker's tests came back without their groups."""
    if node.config.getoption("dist", default="no") == "loadgroup":
        check_groups_reached_xdist(ids)


# The platforms the workers started, handed over as each worker finished (support/platform_ledger)
WORKER_PLATFORMS: list[PlatformEntry] = []
# In the controller: which worker ran which groups, and when (support/worker_timeline)
TIMELINE = WorkerTimeline()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """In the controller: note each worker's report for the workers' timelines."""
    TIMELINE.add_report(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: hand this worker's platform ledger to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[WORKER_OUTPUT_KEY] = LEDGER.to_json()


def pytest_testnodedown(node: WorkerController, error: object) -> None:
    """In the controller: keep what a finished worker's ledger says."""
    ledger = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT_KEY)
    if ledger:
        WORKER_PLATFORMS.extend(entries_from_json(ledger))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how many whole platforms the session started and each one's time (issue 36)."""
    if getattr(terminalreporter.config, "workeroutput", None) is None:  # not inside a worker
        print_summary(terminalreporter, [*WORKER_PLATFORMS, *LEDGER.entries])
        print_timeline(terminalreporter, TIMELINE)


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """A real PostgreSQL: RETRAIN_PG_URL when set, else the embedded server in a temp home.

    The embedded server is stopped when the session ends, not left to pgserver's atexit hook:
    a pytest-xdist worker exits without running atexit hooks, which left its server running.
    Its data is thrown away, so it stops without writing its buffers out first.
    """
    home = tmp_path_factory.mktemp("home")
    server = start_server(home)
    if server.embedded:
        skip_durability(server)
    yield server
    if server.embedded:
        stop_without_checkpoint(home)
        stop_embedded_server(home)


@pytest.fixture(scope="session")
def database_pool(pg_server: PostgresServer) -> Iterator[DatabasePool]:
    """Project and Dagster databases made from templates, emptied and reused between tests."""
    pool = make_pool(pg_server)
    yield pool
    if not pg_server.embedded:
        pool.drop_templates()


@pytest.fixture
def database_slot(database_pool: DatabasePool, monkeypatch: pytest.MonkeyPatch) -> Iterator[Slot]:
    """This test's database name prefix (RETRAIN_DB_PREFIX), given back emptied afterwards."""
    with database_pool.lease() as slot:
        monkeypatch.setenv("RETRAIN_DB_PREFIX", slot.prefix)
        yield slot


@pytest.fixture
def app_db(database_pool: DatabasePool, database_slot: Slot) -> str:
    """A migrated project database holding no row, this test's alone."""
    return database_pool.url(database_slot, "app")


@pytest.fixture
def empty_db(app_db: str, pg_server: PostgresServer) -> str:
    """An empty database under the test's prefix, for the tests of the migrations themselves."""
    return ensure_database(pg_server, "empty")


@pytest.fixture
def dagster_db(database_pool: DatabasePool, database_slot: Slot) -> str:
    """This test's Dagster database (the `dagster` purpose under its prefix), schema made."""
    return database_pool.url(database_slot, "dagster")


@pytest.fixture
def dagster_instance(dagster_db: str) -> Iterator[dg.DagsterInstance]:
    """A test instance whose storage is the test's own PostgreSQL database, as `up` deploys."""
    with dg.instance_for_test(overrides=postgres_storage(dagster_db)) as instance:
        yield instance


@pytest.fixture(scope="session")
def mlflow_uri(
    pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A real `mlflow server` on its own database of pg_server, shared by the whole session.

    Tests share it, so each one works under its own run keys and customers' state it sets.
    """
    with running_mlflow(pg_server, tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri


@pytest.fixture(scope="session")
def shared_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPlatform]:
    """One `retrain-assets up --no-demo` for every system test that can share it.

    Starting the platform costs tens of seconds, so tests that only need *a* running platform
    share this one: each lands its own uniquely named customers and reads only their state.
    Short poller interval; the retraining policy effectively off (SHARED_PLATFORM_ENV).
    """
    home = tmp_path_factory.mktemp("shared-platform")
    with running_platform(home, env=SHARED_PLATFORM_ENV, args=("--no-demo",)) as platform:
        SHARED_PLATFORM_LIFE.platform = platform
        yield platform
        if not SHARED_PLATFORM_LIFE.stopped_early:  # else stopped after its last test
            assert platform.stop() == 0, platform.output.read_text()  # SIGTERM: a clean stop


SEEN_COMMUNITY_NOTE = "mutation { setNuxSeen }"


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, headless, for every browser test of the session (any folder)."""
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
    """A fresh browser page on the shared platform's UI and this test's screenshots folder."""
    with journey_on(chromium, ui_platform.port, request.node.name) as page:
        yield page
