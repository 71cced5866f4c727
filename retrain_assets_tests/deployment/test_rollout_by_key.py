"""A canary judged on forecasts asked by key, as the demo clock asks (issue 24, point 6).

On the session's shared platform: a tenant of this module, landed on days no other test uses
(2025-08-01 to 2025-09-17, a Wednesday), its features published, a weak first champion and a
strong challenger registered and deployed. The forecasts are asked the way a retailer (and the
demo's `forecast_asker`) asks: store, item, date, price and promotion only, for days after the
newest published one; the prediction service computes the features from the published history.
Those days then land and are published, and the canary analysis judges the step on them.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import requests

from retrain_assets.demo.forecast_requests import key_rows
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.lookback import LOOKBACK_DAYS
from retrain_assets.registry.mlflow_registry import CHAMPION, MlflowRegistry
from retrain_assets_tests.deployment.platform_helpers import (
    app,
    days,
    features,
    launch,
    register_version,
    step_failures,
    wait_for_end,
)
from retrain_assets_tests.support.platform import RunningPlatform
from retrain_assets_tests.support.ui_actions import publish_days
from retrain_assets_tests.support.waiting import wait_until

pytestmark = pytest.mark.system

START, LAST = dt.date(2025, 8, 1), dt.date(2025, 9, 17)  # days of this module only
# features look LOOKBACK_DAYS of sales back (34 since store_day_features-v2): a feature day
# before that would train and judge on windows the landed sales only partly fill
FIRST_FEATURE_DAY = START + dt.timedelta(days=LOOKBACK_DAYS)
ASKED = days(LAST + dt.timedelta(days=1), LAST + dt.timedelta(days=4))  # not published yet
KEY_FIELDS = {"store_id", "item_id", "date", "price", "on_promo"}


def land_and_publish(
    platform: RunningPlatform, spec: TenantSpec, first: dt.date, last: dt.date
) -> None:
    """Land the tenant's sales of the days and publish `sales` and `store_day_features`."""
    land_tenant(str(platform.home / "landing"), spec, days(first, last))
    sql = "SELECT count(*) FROM dynamic_partitions WHERE partition = %s"
    wait_until(
        lambda: platform.query("dagster", sql, (spec.name,))[0][0] == 1,
        90,
        f"customer_discovery adding {spec.name}",
    )
    publish_days(platform, "sales", first.isoformat(), last.isoformat())
    feature_first = max(first, FIRST_FEATURE_DAY)
    publish_days(platform, "store_day_features", feature_first.isoformat(), last.isoformat())


def deploy(platform: RunningPlatform, customer: str) -> None:
    run = launch(platform, "deploy_model", customer)
    assert wait_for_end(platform, run) == "SUCCESS", step_failures(platform, run)


def ask_by_key(platform: RunningPlatform, customer: str, rows: list[dict]) -> list[dict]:
    """POST the key rows to /forecast/<customer>, as the demo's ForecastClient does."""
    answer = requests.post(
        f"{platform.serve_url()}/forecast/{customer}",
        json={"rows": rows},
        headers={"Authorization": f"Bearer {platform.serve_token()}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["predictions"]


def route(platform: RunningPlatform, customer: str) -> dict:
    """Return the route the prediction service holds for the customer (GET /v2/models/...)."""
    answer = requests.get(
        f"{platform.serve_url()}/v2/models/{customer}",
        headers={"Authorization": f"Bearer {platform.serve_token()}"},
        timeout=30,
    )
    assert answer.ok, answer.text
    return answer.json()["parameters"]


def test_a_canary_is_judged_on_forecasts_asked_by_key_and_promoted(shared_platform):
    platform, registry = shared_platform, MlflowRegistry(shared_platform.mlflow_url())
    spec = TenantSpec(f"bykey-{uuid.uuid4().hex[:6]}", "US", stores=6, items=20, seed=71)
    customer = spec.name
    land_and_publish(platform, spec, START, LAST)
    weak = features(platform, customer, FIRST_FEATURE_DAY, LAST - dt.timedelta(days=10))
    # weak and strong by far (WAPE 0.36 and 0.30 on every asked row, measured offline), so a
    # 10 % canary sample of a few dozen rows cannot reverse them: 12 and 150 rounds were 0.33
    # and 0.32, and the canary rolled the strong one back on 36 and on 64 rows. The weak one
    # still beats the seasonal naive on the newest 3 days (0.46 vs 0.50), as its deploy needs.
    first = register_version(platform, customer, f"{customer}-weak", weak, rounds=8)
    deploy(platform, customer)  # no champion yet: promoted directly
    assert registry.aliases(customer)[CHAMPION] == first
    train = features(platform, customer, FIRST_FEATURE_DAY, LAST)
    second = register_version(platform, customer, f"{customer}-strong", train, rounds=60)
    deploy(platform, customer)
    [(rollout_id,)] = app(
        platform, "SELECT id FROM rollouts WHERE customer = %s AND outcome IS NULL", (customer,)
    )

    wait_until(
        lambda: route(platform, customer)["canary_version"] == second,
        60,
        f"the prediction service routing {customer}'s canary",
    )
    asked = [row for day in ASKED for row in key_rows(spec, day)]
    assert all(set(row) == KEY_FIELDS for row in asked)  # no feature: the service computes them
    answered = ask_by_key(platform, customer, asked)
    assert [a["request_key"] for a in answered] == [
        f"{r['store_id']}/{r['item_id']}/{r['date']}" for r in asked
    ]
    assert all(a["reason"] is None and a["prediction"] is not None for a in answered)
    assert [(a["price"], a["on_promo"], a["defaulted"]) for a in answered] == [
        (r["price"], r["on_promo"], []) for r in asked
    ]  # the planned price and promotion taken, none defaulted
    assert {a["alias"] for a in answered} == {"champion", "canary"}

    land_and_publish(platform, spec, ASKED[0], ASKED[-1])  # the asked days' actuals

    def finished() -> bool:
        if route(platform, customer)["step"] == "CANARY_50":  # it needs predictions of its own
            ask_by_key(platform, customer, asked)
        [(outcome,)] = app(platform, "SELECT outcome FROM rollouts WHERE id = %s", (rollout_id,))
        return outcome is not None

    wait_until(finished, 120, f"the rollout of {customer}'s challenger to end", interval=1)
    assert app(platform, "SELECT outcome, reason FROM rollouts WHERE id = %s", (rollout_id,)) == [
        ("promoted", "promoted after CANARY_10 and CANARY_50 passed")
    ]
    assert registry.aliases(customer)[CHAMPION] == second
    analyses = app(
        platform,
        "SELECT step, passed, canary_requests, rows_with_actuals FROM rollout_analyses"
        " WHERE rollout_id = %s ORDER BY id",
        (rollout_id,),
    )
    assert [(step, passed) for step, passed, _, _ in analyses] == [
        ("CANARY_10", True),
        ("CANARY_50", True),
    ]
    assert all(requested >= 20 and actuals >= 20 for _, _, requested, actuals in analyses)
    # What the analysis read: only the keys asked, and the first step's forecasts were logged
    # before their days were published (so made from the history, not from their features).
    logged = app(
        platform,
        "SELECT DISTINCT request_key FROM prediction_log WHERE rollout_id = %s",
        (rollout_id,),
    )
    assert {key for (key,) in logged} == {a["request_key"] for a in answered}
    [(last_served, first_published)] = app(
        platform,
        """
        SELECT (SELECT max(served_at) FROM prediction_log
                WHERE rollout_id = %s AND step = 'CANARY_10'),
            (SELECT min(published_at) FROM feature_snapshots WHERE partition_date = ANY(%s))""",
        (rollout_id, ASKED),
    )
    assert last_served < first_published
