"""Peak resident memory of one piece of work inside a long-lived process (Linux).

Writing "5" to /proc/self/clear_refs resets the process's high-water mark (VmHWM) to its
current RSS, so the peak read after the work is the peak *of that work* on top of what the
process already held, which is what a sensor tick costs the daemon that evaluates it.
"""

from __future__ import annotations

import re
from pathlib import Path

_STATUS = Path("/proc/self/status")


def reset_peak() -> None:
    """Start a new peak at the current RSS (Linux: /proc/self/clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_mib() -> float:
    """Return the process's peak RSS since the last `reset_peak` (or its start), in MiB."""
    found = re.search(r"VmHWM:\s+(\d+) kB", _STATUS.read_text())
    return int(found.group(1)) / 1024 if found else float("nan")


def rss_mib() -> float:
    """Return the process's current RSS in MiB."""
    found = re.search(r"VmRSS:\s+(\d+) kB", _STATUS.read_text())
    return int(found.group(1)) / 1024 if found else float("nan")
