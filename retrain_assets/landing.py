"""The landing zone: where each customer drops one CSV per day, and what those files hold.

Layout: `<landing root>/<customer>/<YYYY-MM-DD>.csv`, plus `customer.json` naming the country
whose public holidays apply. The root is a folder or an object-storage URL (UPath).
"""

from __future__ import annotations

import datetime as dt
import json

from upath import UPath

from retrain_assets.customer_names import validate_customer_name

LANDING_COLUMNS = [
    "date",
    "store_id",
    "item_id",
    "units_sold",
    "price",
    "on_promo",
    "stock_on_hand",
]
MANIFEST = "customer.json"


def day_file(landing_root: str, customer: str, day: dt.date) -> UPath:
    """Return the path of one customer's file for one day (InvalidCustomerName if unsafe)."""
    return UPath(landing_root) / validate_customer_name(customer) / f"{day.isoformat()}.csv"


def customer_folders(landing_root: str) -> list[str]:
    """Return the names of the folders in the landing zone, sorted (valid names or not)."""
    root = UPath(landing_root)
    if not root.exists():
        return []
    return sorted(path.name for path in root.iterdir() if path.is_dir())


def read_manifest_country(landing_root: str, customer: str) -> str | None:
    """Return the country named in a customer's landing manifest, if it has one."""
    manifest = UPath(landing_root) / validate_customer_name(customer) / MANIFEST
    if not manifest.exists():
        return None
    country = json.loads(manifest.read_text()).get("country")
    return str(country).upper() if country else None


def write_manifest(landing_root: str, customer: str, country: str) -> None:
    """Write a customer's manifest (the simulator does this for demo tenants)."""
    folder = UPath(landing_root) / validate_customer_name(customer)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).write_text(json.dumps({"country": country}))
