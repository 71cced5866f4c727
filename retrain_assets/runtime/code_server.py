"""One code server for the webserver and the daemon, started and watched by `up`.

With a `python_package` workspace each of dagster-webserver and dagster-daemon starts a code
server of its own, and the daemon throws its away every 60 s (Dagster's daemon controller
clears its code servers and reloads the workspace on that interval): a fresh process importing
Dagster and the code location again, about 5 CPU-s a minute on an idle platform, the bulk of
what an idle platform cost. `up` instead runs one `dagster code-server start` on a Unix socket
in a private folder and gives both processes a workspace naming it, so the daemon's refresh is
a snapshot fetched over the socket. The code server reloads the code itself when the UI's
"Reload" asks, and runs are its processes (its process group): `up` restarts it like any
child, and run monitoring fails the runs its crash took with it (run_launcher.py).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from retrain_assets.runtime.supervisor import ChildSpec

LOCATION_NAME = "retrain_assets"
CODE_LOCATION_MODULE = "retrain_assets.definitions"
SOCKET_NAME = "code-server.sock"
# Unix socket paths are limited to 107 bytes, which a deep RETRAIN_HOME can pass: the socket
# lives in a private (0700) folder of the system's temporary directory instead.
SOCKET_FOLDER_PREFIX = "retrain-code-server-"


def socket_folder() -> Path:
    """Create the private folder of this `up`'s code server socket (removed at stop)."""
    return Path(tempfile.mkdtemp(prefix=SOCKET_FOLDER_PREFIX))


def remove_socket_folder(folder: Path) -> None:
    """Remove the socket's folder and what the code server left in it."""
    shutil.rmtree(folder, ignore_errors=True)


def code_server_child(bin_dir: Path, socket: Path) -> ChildSpec:
    """Return `dagster code-server start` for the code location, on `socket`.

    It binds the socket only once the code location has loaded, so the socket answering is
    the ready signal (`unix:` ready URL).
    """
    argv = (
        str(bin_dir / "dagster"),
        *("code-server", "start", "-m", CODE_LOCATION_MODULE),
        *("--socket", str(socket), "--location-name", LOCATION_NAME),
        *("--log-level", "warning"),
    )
    return ChildSpec(name="code-server", argv=argv, ready_url=f"unix:{socket}")


def write_workspace(dagster_home: Path, socket: Path) -> Path:
    """Write the workspace the webserver and the daemon load: the one code server's socket."""
    workspace = dagster_home / "workspace.yaml"
    workspace.write_text(
        "# Written by `retrain-assets up`: the code server it runs (runtime/code_server.py).\n"
        "load_from:\n"
        "  - grpc_server:\n"
        f"      socket: {socket}\n"
        f"      location_name: {LOCATION_NAME}\n"
    )
    return workspace
