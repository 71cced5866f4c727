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
LOAD_AS_SHIPPED = """
import json, warnings
seen = []
warnings.showwarning = lambda message, category, *rest, **kw: seen.append(
    f"{category.__name__}: {message}"
)
from retrain_assets.definitions import build_definitions
build_definitions()
print(json.dumps(seen))
"""


def warnings_printed(program: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_warning_loading_raises_is_known_and_every_known_one_is_still_raised():
    raised = warnings_printed(LOAD_WITH_NOTHING_SILENCED)
    unknown = [w for w in raised if not any(k.message in w for k in KNOWN_WARNINGS)]
    assert unknown == [], "a new warning: read it, then fix it or add it with its reason"
    stale = [k.message for k in KNOWN_WARNINGS if not any(k.message in w for w in raised)]
    assert stale == [], "no longer raised: drop these from KNOWN_WARNINGS"
    assert warnings_printed(LOAD_AS_SHIPPED) == []
