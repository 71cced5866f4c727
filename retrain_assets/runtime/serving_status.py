"""The `serving` half of `retrain-assets status`: what serves each customer, and how fresh.

The same verdict the `serving_model_fresh` check shows in the UI (`models/freshness.py`), so a
terminal and the Checks tab never disagree; what waits for a person is named with how to act.
"""

from __future__ import annotations

from retrain_assets.models.freshness import judge_freshness
from retrain_assets.store.customers import customer_countries

MARK = {"fresh": "fresh", "warn": "WARNING", "error": "ERROR"}


def serving_lines(url: str, customer: str | None = None) -> list[str]:
    """Return one line per customer (its verdict), plus one for what waits for a person."""
    customers = [customer] if customer else sorted(customer_countries(url))
    if not customers:
        return ["no customer registered yet"]
    lines = []
    for name, verdict in sorted(judge_freshness(url, customers).items()):
        lines.append(f"{name:<20} serving   {MARK[verdict.severity]:<8} {verdict.reason}")
        if verdict.waiting_for_person:
            lines.append(f"    waits for a person: {verdict.waiting_for_person}")
    return lines
