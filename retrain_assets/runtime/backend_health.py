"""`status`'s first line: can the training backend take jobs now?

A customer stuck in POLL_JOB may be waiting on a GPU service that is down or a Slurm node that
is drained; the machines' rows cannot say so. The reference backend is asked its `/healthz`;
for Slurm, `sinfo` (with SLURM_CONF, which `up` records for its own cluster) lists each node's
state and, for a drained or down node, the reason Slurm gives.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import requests

from retrain_assets.settings import gpu_service_url, training_backend

HEALTH_TIMEOUT_SECONDS = 3.0
UNHEALTHY_NODE_STATES = ("drain", "down", "fail", "not_responding", "unknown")


def backend_health_lines() -> list[str]:
    """Return one line per backend endpoint (GPU service) or Slurm node, saying its health."""
    if training_backend() == "slurm":
        return slurm_node_lines()
    return [gpu_service_line(gpu_service_url())]


def gpu_service_line(url: str) -> str:
    """Say whether the GPU service at `url` answers its health endpoint."""
    health = f"{url.rstrip('/')}/healthz"
    try:
        response = requests.get(health, timeout=HEALTH_TIMEOUT_SECONDS)
    except requests.RequestException as err:
        return f"training backend: GPU service UNREACHABLE at {health} ({type(err).__name__})"
    if response.status_code == 200:
        return f"training backend: GPU service reachable at {url} (healthy)"
    return (
        f"training backend: GPU service at {url} answers {response.status_code}: "
        f"{response.text[:200].strip()}"
    )


def slurm_node_lines() -> list[str]:
    """Return each Slurm node's state (and reason when drained or down), from `sinfo`."""
    conf = os.environ.get("SLURM_CONF")
    sinfo = shutil.which("sinfo")
    if sinfo is None:
        return ["training backend: Slurm; `sinfo` is not installed, node states unknown"]
    command = [sinfo, "--noheader", "--Node", "--format=%N|%T|%E"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=15, check=False)
    except subprocess.TimeoutExpired:
        return ["training backend: Slurm; `sinfo` did not answer within 15 s"]
    where = f"SLURM_CONF={conf}" if conf else "SLURM_CONF unset"
    if done.returncode != 0:
        error = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return [f"training backend: Slurm UNREACHABLE ({where}): {error[0]}"]
    lines = []
    for row in sorted(set(done.stdout.strip().splitlines())):
        node, state, reason = [*row.split("|", 2), "", ""][:3]
        bad = any(word in state.lower() for word in UNHEALTHY_NODE_STATES)
        why = f", reason: {reason}" if bad and reason and reason != "none" else ""
        lines.append(f"training backend: Slurm node {node} {state.upper() if bad else state}{why}")
    return lines or [f"training backend: Slurm has no nodes ({where})"]
