"""The demo's customers asking for tomorrow's forecasts, before tomorrow's sales land.

A retailer orders stock from a forecast for the next day; the sales that land the day after
are what the forecast is judged on. It asks as a retailer can: store, item, day, and the price
and promotion it plans (the simulator plans them for a demo tenant), `key_rows`; the
prediction service computes the features from the published history.

`request_rows` gives the same rows with every feature computed here, from the simulated
history with the `store_day_features` code: the tests that drive a service without a published
history (the rollout and chaos suites) send those.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

import requests

from retrain_assets.demo.clock import BeforeLanding
from retrain_assets.demo.simulate import simulate_day, simulated_sales
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.feature_math import LOOKBACK, store_day_features
from retrain_assets.features.training_export import MODEL_FEATURES


def key_rows(spec: TenantSpec, day: dt.date) -> list[dict[str, Any]]:
    """Return one request row per store and item of `spec` for `day`: the key and covariates."""
    planned = simulate_day(spec, day)
    return [
        {
            "store_id": str(store),
            "item_id": str(item),
            "date": day.isoformat(),
            "price": float(price),
            "on_promo": bool(promo),
        }
        for store, item, price, promo in zip(
            planned["store_id"],
            planned["item_id"],
            planned["price"],
            planned["on_promo"],
            strict=True,
        )
    ]


def request_rows(spec: TenantSpec, day: dt.date) -> list[dict[str, Any]]:
    """Return one request row per store and item of `spec` for `day`, features only."""
    history = [day - dt.timedelta(days=back) for back in range(LOOKBACK, -1, -1)]
    sales = simulated_sales(spec, history)
    features = store_day_features(sales, [day], {spec.name: spec.country})
    rows = []
    for record in features[["store_id", "item_id", *MODEL_FEATURES]].to_dict("records"):
        row: dict[str, Any] = {
            "store_id": record["store_id"],
            "item_id": record["item_id"],
            "date": day.isoformat(),
        }
        for name in MODEL_FEATURES:
            value = float(record[name])
            row[name] = None if math.isnan(value) else value
        rows.append(row)
    return rows


class ForecastClient:
    """Asks the prediction service's JSON route for forecasts, as a retailer's system would."""

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        """Talk to the service at `url` with its bearer `token`."""
        self.url, self.timeout = url.rstrip("/"), timeout
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def forecast(self, customer: str, rows: list[dict[str, Any]]) -> requests.Response:
        """POST the rows to `/forecast/<customer>` and return the service's answer."""
        return self.session.post(
            f"{self.url}/forecast/{customer}", json={"rows": rows}, timeout=self.timeout
        )


def forecast_asker(client: ForecastClient, say: Callable[[str], None]) -> BeforeLanding:
    """Return the demo clock's hook: ask for a tenant's forecasts of a day before it lands.

    A tenant with no champion yet is answered 404/409 by the service: said once per tenant
    until it has one, not an error of the demo. Any other refusal is said every time.
    """
    waiting: set[str] = set()

    def ask(spec: TenantSpec, day: dt.date) -> None:
        try:
            answer = client.forecast(spec.name, key_rows(spec, day))
        except requests.RequestException as err:
            say(f"{spec.name} {day}: the prediction service did not answer: {err}")
            return
        if answer.ok:
            waiting.discard(spec.name)
            rows = answer.json().get("predictions", [])
            unanswered = sum(1 for row in rows if row.get("reason"))
            more = f" ({unanswered} without history)" if unanswered else ""
            say(f"{spec.name} {day}: {len(rows) - unanswered} forecasts{more}")
        elif answer.status_code in (404, 409):
            if spec.name not in waiting:
                say(f"{spec.name}: no forecasts yet ({answer.status_code}: {_reason(answer)})")
            waiting.add(spec.name)
        else:
            say(f"{spec.name} {day}: forecasts refused ({answer.status_code}: {_reason(answer)})")

    return ask


def _reason(answer: requests.Response) -> str:
    try:
        body = answer.json()
    except ValueError:
        return answer.text[:200]
    return str(body.get("error") or body.get("detail") or body)[:200]
