"""What `retrain-assets decisions` and `retrain-assets policy` print: plain text, one row a line.

The CLI handlers stay small; the formatting and the database reads live here.
"""

from __future__ import annotations

import dataclasses

from retrain_assets.policy.decisions import list_decisions
from retrain_assets.policy.thresholds import DEFAULTS, FIELDS, all_settings, set_settings
from retrain_assets.store.customers import customer_countries


def decision_lines(url: str, customer: str | None, limit: int) -> list[str]:
    """Return the latest decisions, newest first, with policy, reason, snapshot and run."""
    decisions = list_decisions(url, customer, limit)
    if not decisions:
        return [f"no retraining decisions{f' for {customer}' if customer else ''} yet"]
    lines = []
    for d in decisions:
        lines.append(
            f"{d.id:>6}  {d.decided_at:%Y-%m-%d %H:%M:%S}  {d.customer:<20} {d.policy:<8} "
            f"{d.first_day} .. {d.last_day} ({len(d.data_versions)} days)  "
            f"by {d.decided_by}  run {d.dagster_run_id or '(not launched yet)'}"
        )
        lines.append(f"        {d.reason}")
    return lines


def settings_lines(url: str, customer: str | None) -> list[str]:
    """Return each customer's effective settings; `*` marks a value overriding the default."""
    overrides = all_settings(url)
    names = [customer] if customer else sorted(set(customer_countries(url)) | set(overrides))
    lines = [f"defaults: {_format(dataclasses.asdict(DEFAULTS), set())}"]
    for name in names:
        mine = overrides.get(name, DEFAULTS)
        changed = {f for f in FIELDS if getattr(mine, f) != getattr(DEFAULTS, f)}
        lines.append(f"{name}: {_format(dataclasses.asdict(mine), changed)}")
    return lines


def apply_settings(url: str, customer: str, changes: dict[str, float], who: str) -> str:
    """Store a customer's overrides; return its new effective settings as one line."""
    if not changes:
        raise ValueError("policy set: give at least one setting, e.g. --min-new-rows 500")
    updated = set_settings(url, customer, changes, who)
    changed = {f for f in FIELDS if getattr(updated, f) != getattr(DEFAULTS, f)}
    return f"{customer}: {_format(dataclasses.asdict(updated), changed)}"


def _format(values: dict[str, object], changed: set[str]) -> str:
    return " ".join(f"{k}={v}{'*' if k in changed else ''}" for k, v in values.items())
