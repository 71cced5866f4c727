"""A pytest started as a background job still lets SIGTERM stop what its tests start."""

import signal
import subprocess
import sys
import textwrap

# In a process that ignores SIGINT (as a background job does): what a child started after an
# in-process Dagster run sees for SIGTERM, before and after restore_stop_signals().
PROBE = textwrap.dedent(
    """
    import signal, subprocess, sys
    import dagster as dg
    from retrain_assets_tests.support.stop_signals import restore_stop_signals

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    @dg.asset
    def one() -> int:
        return 1

    def child_sees() -> str:
        ask = "import signal; print(int(signal.getsignal(signal.SIGTERM)))"
        return subprocess.run(
            [sys.executable, "-c", ask], capture_output=True, text=True, check=True
        ).stdout.strip()

    dg.materialize([one])
    before = child_sees()
    restored = restore_stop_signals()
    dg.materialize([one])
    print(before, child_sees(), ",".join(restored))
    """
)


def test_a_child_started_after_a_dagster_run_can_be_terminated():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    before, after, restored = out[-3:]
    # Dagster's interrupt mapping makes SIGTERM ignored when SIGINT is: the hazard is real
    assert before == str(int(signal.SIG_IGN)), out
    assert restored == "SIGINT,SIGTERM"
    assert after == str(int(signal.SIG_DFL)), out
