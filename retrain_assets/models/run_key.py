"""The run key: one identity for a training run, from everything that determines its result.

`sha256(json([snapshot hash, feature version, training config, code commit]))[:16]` is the GPU
job's idempotency key, the candidate's storage path, the Dagster `run_key` of sensor requests
and the candidate's DataVersion. Anything else (who asked, when, how often) must not change it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import retrain_assets
from retrain_assets.settings_model import current_settings

KEY_LENGTH = 16


def run_key(
    snapshot_sha: str, feature_version: str, training_config: Mapping[str, Any], code_commit: str
) -> str:
    """Return the shortened sha256 of the canonical JSON of the four inputs."""
    canonical = json.dumps(
        [snapshot_sha, feature_version, dict(training_config), code_commit],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:KEY_LENGTH]


@functools.cache
def code_commit() -> str:
    """Return the code's commit: RETRAIN_CODE_COMMIT, else the checkout's HEAD (+dirty).

    Raises:
        RuntimeError: neither is available; training without knowing the code is refused.
    """
    pinned = current_settings().code_commit
    if pinned:
        return pinned
    root = Path(retrain_assets.__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        raise RuntimeError(f"cannot tell the code commit: set RETRAIN_CODE_COMMIT ({err})") from err
    return head
