"""The hand-off's candidate runs of a training run key, read through the webserver's GraphQL.

The hand-off requests `candidate-<run key>-<attempt>` and tags every attempt with the run key
(RUN_KEY_TAG); journeys and the chaos suite both follow those runs.
"""

from __future__ import annotations

from retrain_assets.automation.handoff import RUN_KEY_TAG
from retrain_assets_tests.support.platform import RunningPlatform

RUNS_TAGGED = """
query Runs($tags: [ExecutionTag!]) {
  runsOrError(filter: {tags: $tags}) { ... on Runs { results { runId status } } }
}
"""
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}


def candidate_runs(platform: RunningPlatform, run_key: str) -> list[dict]:
    """Return the candidate runs of a run key (id and status), newest first."""
    tags = [{"key": RUN_KEY_TAG, "value": run_key}]
    return platform.graphql(RUNS_TAGGED, {"tags": tags})["runsOrError"]["results"]
