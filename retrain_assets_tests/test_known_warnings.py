"""Loading the code location prints no warning, and every silenced one is still needed."""

from __future__ import annotations

import json
import subprocess
import sys

from retrain_assets.known_warnings import KNOWN_WARNINGS

# Loads the code location as the code server does, with every filter reset after the package
# installed its own: what would print with nothing silenced.
LOAD_WITH_NOTHING_SILENCED = """
import json, warnings
import retrain_assets
warnings.resetwarnings()
warnings.simplefilter("always")
seen = []
warnings.showwarning = lambda message, category, *rest, **kw: seen.append(
    f"{category.__name__}: {message}"
)
from retrain_assets.definitions import build_definitions
build_definitions()
print(json.dumps(seen))
"""

# The filters a fresh process has once it imported the package (pytest resets its own).
IGNORED_AFTER_IMPORT = """
import json, re, warnings
import retrain_assets
print(json.dumps([p.pattern for a, p, *_ in warnings.filters
                  if a == "ignore" and isinstance(p, re.Pattern)]))
"""


def printed_by(program: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_warning_loading_raises_is_known_and_every_known_one_is_still_raised():
    raised = printed_by(LOAD_WITH_NOTHING_SILENCED)
    unknown = [w for w in raised if not any(k.message in w for k in KNOWN_WARNINGS)]
    assert unknown == [], "a new warning: read it, then fix it or add it with its reason"
    stale = [k.message for k in KNOWN_WARNINGS if not any(k.message in w for w in raised)]
    assert stale == [], "no longer raised: drop these from KNOWN_WARNINGS"


def test_importing_the_package_installs_an_ignore_filter_for_each_known_warning():
    ignored = set(printed_by(IGNORED_AFTER_IMPORT))
    assert {known.pattern() for known in KNOWN_WARNINGS} <= ignored
