"""The warnings Dagster prints for features this code location uses on purpose, silenced once.

Every process that loads the code location (the code server, each run's process, the CLI)
printed the same Preview and Beta warnings at import: about 1,250 lines an hour of the live
demo, in which a new warning could not be seen. Each one below is a feature chosen by design
(the reason says why), silenced by its exact message only, so any other warning still prints.
A test (retrain_assets_tests/test_known_warnings.py) loads the code location with these
filters off and fails when a silenced warning is no longer raised (the filter is stale: drop
it) or when loading raises one that is not here (read it, then fix or add it with a reason).

No import of dagster here: the package's `__init__` installs the filters before any module
that declares an asset, and processes that never load Dagster (the prediction service) stay
light.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownWarning:
    """A warning's message (the start of it, matched literally) and why it is silenced."""

    message: str
    reason: str

    def pattern(self) -> str:
        """The filter's regular expression: this message, literally, at a message's start."""
        return re.escape(self.message)


KNOWN_WARNINGS = (
    KnownWarning(
        "Specifying a partitions_def on an AssetCheckSpec is currently in preview",
        "the per-customer checks (serving_model_fresh, the registry audit) are partitioned by "
        "design: a freshness policy is per asset, not per partition (docs/decisions.md)",
    ),
    KnownWarning(
        "Parameter `backfill_policy` of function `asset` is currently in beta",
        "a feature backfill is one run (BackfillPolicy.single_run), measured in BENCHMARKS.md",
    ),
    KnownWarning(
        "Parameter `allow_nonexistent_upstream_partitions` of initializer "
        "`TimeWindowPartitionMapping.__init__` is currently in beta",
        "the first 28 feature days of a history look back on sales days that do not exist",
    ),
    KnownWarning(
        "Function `_create_mlflow_run_hook` is currently in beta",
        "dagster-mlflow declares its own run hook beta at import; deployment/tracking.py "
        "uses its MlFlow resource",
    ),
)


def silence_known_warnings() -> None:
    """Ignore exactly the warnings above, in this process, whatever the warnings filters say."""
    for known in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=known.pattern())
