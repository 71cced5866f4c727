"""What the code location imports: every code server and every Dagster run pays for it.

Each run is a fresh process that imports `retrain_assets.definitions`; LightGBM and
scikit-learn cost about 0.9 s of CPU there, and only the runs that train or score need them
(they import them when they do).
"""

import subprocess
import sys

TRAINING_ONLY = ("lightgbm", "sklearn")


def test_the_code_location_loads_without_the_training_libraries() -> None:
    code = (
        "import sys, retrain_assets.definitions\n"
        f"print(' '.join(m for m in {TRAINING_ONLY!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "", f"importing retrain_assets.definitions loads {loaded}"
