"""`retrain-assets up`: Postgres, the Dagster instance, the demo data and the processes, as one.

The order matters: ports are checked before anything starts, the databases exist before a
process connects to them, the demo tenants have landed before the sensors first look, and the
GPU service, the MLflow tracking server and the prediction service (which loads its models from
MLflow) start before the Dagster processes that call them.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from retrain_assets.gpu.slurm.cluster_config import ClusterPaths
from retrain_assets.runtime.code_server import (
    SOCKET_NAME,
    code_server_child,
    remove_socket_folder,
    socket_folder,
    write_workspace,
)
from retrain_assets.runtime.demo_mode import demo_children, demo_environment, start_demo
from retrain_assets.runtime.environment import (
    child_environment,
    prepare_dagster_home,
    redact_url,
    remote_gpu_url,
    remote_mlflow_uri,
    repo_file,
)
from retrain_assets.runtime.lock import HomeInUse, lock_home
from retrain_assets.runtime.platform_file import (
    PlatformFileError,
    RecordedProcess,
    read_platform_file,
    remove_platform_file,
)
from retrain_assets.runtime.platform_record import PlatformRecorder
from retrain_assets.runtime.ports import LOOPBACK, PortNeed, busy_port_messages
from retrain_assets.runtime.reaper import DEFAULT_GRACE_SECONDS, start_reaper
from retrain_assets.runtime.reaping import stop_platform_processes
from retrain_assets.runtime.signals import StopRequests
from retrain_assets.runtime.slurm_children import slurm_children, slurm_refusal
from retrain_assets.runtime.supervisor import ChildFailed, ChildSpec, Supervisor
from retrain_assets.runtime.token_files import tokens_folder, write_token_files
from retrain_assets.settings import (
    database_name,
    gpu_allow_faults,
    gpu_service_port,
    gpu_service_url,
    gpu_slots,
    mlflow_artifacts_root,
    mlflow_port,
    mlflow_tracking_uri,
    ready_timeout_seconds,
    retrain_home,
    serve_port,
    slurm_home,
    slurm_url,
    training_backend,
    webserver_port,
)
from retrain_assets.settings_model import check_settings, current_settings
from retrain_assets.store.migrations import migrate
from retrain_assets.store.server import (
    PostgresServer,
    embedded_postmaster_pid,
    ensure_database,
    forget_handle,
    start_server,
)

STOP_GRACE_SECONDS = DEFAULT_GRACE_SECONDS
WATCH_SECONDS = 0.5


def needed_ports() -> list[PortNeed]:
    """Return the ports the platform listens on; a new process adds its line here.

    The GPU service's port only counts when `up` starts that service (`local_gpu_service`),
    MLflow's only when `up` starts the local tracking server (MLFLOW_TRACKING_URI unset).
    """
    needs = [PortNeed("dagster-webserver", webserver_port(), "RETRAIN_WEBSERVER_PORT")]
    if local_gpu_service():
        needs.append(PortNeed("gpu-service", gpu_service_port(), "RETRAIN_GPU_PORT"))
    if remote_mlflow_uri() is None:
        needs.append(PortNeed("mlflow", mlflow_port(), "RETRAIN_MLFLOW_PORT"))
    needs.append(PortNeed("prediction-service", serve_port(), "RETRAIN_SERVE_PORT"))
    return needs


def local_gpu_service() -> bool:
    """Return True when `up` starts the reference GPU service: the default backend, not remote."""
    return training_backend() == "reference" and remote_gpu_url() is None


def training_children(bin_dir: Path) -> list[ChildSpec]:
    """Return the training backend `up` runs: the GPU service, a Slurm cluster, or none.

    With RETRAIN_TRAINING_BACKEND=slurm and no RETRAIN_SLURM_URL, a one-node cluster under
    $RETRAIN_HOME/slurm, one supervised child per daemon (`runtime/slurm_children.py`, root
    and Debian's packages needed); with a remote service or cluster, nothing.
    """
    if training_backend() == "slurm":
        return [] if current_settings().slurm_url else slurm_children()
    return [gpu_service_child(bin_dir)] if local_gpu_service() else []


def gpu_service_child(bin_dir: Path) -> ChildSpec:
    """Return the local reference GPU service, on loopback, configured by RETRAIN_GPU_*."""
    port = str(gpu_service_port())
    argv = [str(bin_dir / "retrain-assets"), "gpu-service", "--host", LOOPBACK, "--port", port]
    argv += ["--slots", str(gpu_slots())]
    if gpu_allow_faults():
        argv.append("--allow-faults")
    return ChildSpec(
        name="gpu-service", argv=tuple(argv), ready_url=f"http://{LOOPBACK}:{port}/healthz"
    )


def mlflow_child(bin_dir: Path, backend_store_uri: str) -> ChildSpec:
    """Return the local MLflow tracking server and model registry, on loopback.

    Runs and registered models live in `backend_store_uri` (the `mlflow` database on the
    platform's Postgres); the server itself stores and serves the artifacts under
    `$RETRAIN_HOME/mlflow-artifacts` (or RETRAIN_MLFLOW_ARTIFACTS_URL), so clients need no
    access to them. One worker is plenty for a handful of Dagster runs.
    """
    port = str(mlflow_port())
    artifacts = mlflow_artifacts_root()
    if "://" not in artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
    argv = [str(bin_dir / "mlflow"), "server", "--host", LOOPBACK, "--port", port]
    argv += ["--backend-store-uri", backend_store_uri, "--artifacts-destination", artifacts]
    argv += ["--serve-artifacts", "--workers", "1"]
    return ChildSpec(name="mlflow", argv=tuple(argv), ready_url=f"http://{LOOPBACK}:{port}/health")


def prediction_service_child(bin_dir: Path) -> ChildSpec:
    """Return the prediction service (`retrain-assets serve`), on loopback at RETRAIN_SERVE_PORT.

    Ready once it has read `serving_routes` and Postgres answers (its /v2/health/ready).
    """
    port = str(serve_port())
    argv = (str(bin_dir / "retrain-assets"), "serve", "--host", LOOPBACK, "--port", port)
    return ChildSpec(
        name="prediction-service",
        argv=argv,
        ready_url=f"http://{LOOPBACK}:{port}/v2/health/ready",
    )


def platform_children(
    code_server_socket: Path, workspace: Path, mlflow_backend_uri: str
) -> list[ChildSpec]:
    """Return the processes `up` runs, in start order; a new process adds its spec here.

    The GPU service comes first, unless RETRAIN_GPU_URL names one elsewhere: the daemon's
    sensors call it. The MLflow server (backed by `mlflow_backend_uri`) comes next, unless
    MLFLOW_TRACKING_URI names one elsewhere: the model assets call it. The prediction service
    follows (it loads models from MLflow), then the code server on `code_server_socket`, and
    the Dagster processes, whose `workspace` names that socket, once it is ready
    (runtime/code_server.py). The executables are the ones installed next to this
    interpreter, so the children run in the same environment as `up` whatever PATH says.
    """
    bin_dir = Path(sys.executable).parent
    port, workspace_arg = str(webserver_port()), ("-w", str(workspace))
    code_server = code_server_child(bin_dir, code_server_socket)
    gpu = training_children(bin_dir)
    local_mlflow = remote_mlflow_uri() is None
    mlflow = [mlflow_child(bin_dir, mlflow_backend_uri)] if local_mlflow else []
    return [
        *gpu,
        *mlflow,
        prediction_service_child(bin_dir),
        code_server,
        ChildSpec(
            name="dagster-webserver",
            argv=(
                *(str(bin_dir / "retrain-assets"), "webserver", "--host", LOOPBACK),
                *("--port", port, "--workspace", str(workspace)),
            ),
            ready_url=f"http://{LOOPBACK}:{port}/server_info",
            after_ready=(code_server.name,),
        ),
        ChildSpec(
            name="dagster-daemon",
            argv=(str(bin_dir / "dagster-daemon"), "run", *workspace_arg),
            after_ready=(code_server.name,),
        ),
    ]


def platform_endpoints(server: PostgresServer) -> dict[str, str]:
    """Return the endpoints this `up` uses, as `platform.json` records them for other commands.

    The names are those of `runtime/platform_env.ENDPOINT_VARIABLES`.
    """
    endpoints = {
        "mlflow_uri": mlflow_tracking_uri(),
        "serve_url": f"http://{LOOPBACK}:{serve_port()}",
        "webserver_port": str(webserver_port()),
        "postgres_url": server.url,
        "training_backend": training_backend(),
    }
    if training_backend() == "slurm":
        endpoints["slurm_url"] = slurm_url()
        local = not current_settings().slurm_url
        conf = str(ClusterPaths(slurm_home()).conf) if local else os.environ.get("SLURM_CONF")
        if conf:
            endpoints["slurm_conf"] = conf
    else:
        endpoints["gpu_url"] = gpu_service_url()
    return endpoints


def _record_postgres(recorder: PlatformRecorder, server: PostgresServer) -> None:
    """Record the embedded Postgres: pg_ctl started it, so it is no child of the supervisor."""
    pid = embedded_postmaster_pid() if server.embedded else None
    if pid is not None:
        # SIGINT is Postgres's fast shutdown: clients disconnected, a clean checkpoint
        recorder.servers = [RecordedProcess.of("postgres", pid, group=False, stop_signal="SIGINT")]


def _say(message: str) -> None:
    print(f"retrain-assets up: {message}", flush=True)


def _prepare_databases() -> PostgresServer:
    """Start (or attach to) Postgres and bring the Dagster and project databases up to date.

    The local MLflow server's database is created here too (MLflow migrates its own schema
    when it starts); with MLFLOW_TRACKING_URI set there is no local server and no database.
    """
    server = start_server()
    ensure_database(server, "dagster")
    version = migrate(ensure_database(server, "app"))
    mlflow = ""
    if remote_mlflow_uri() is None:
        ensure_database(server, "mlflow")
        mlflow = f", {database_name('mlflow')}"
    kind = "embedded" if server.embedded else "RETRAIN_PG_URL"
    _say(
        f"Postgres ready ({kind}): databases {database_name('dagster')}, "
        f"{database_name('app')} (schema version {version}){mlflow}"
    )
    return server


def _gpu_service_line() -> str:
    if training_backend() == "slurm":
        return f"Slurm, slurmrestd at {slurm_url()} (RETRAIN_TRAINING_BACKEND=slurm)"
    remote = remote_gpu_url()
    return f"{remote} (RETRAIN_GPU_URL)" if remote else gpu_service_url()


def _mlflow_line() -> str:
    remote = remote_mlflow_uri()
    return f"{remote} (MLFLOW_TRACKING_URI)" if remote else mlflow_tracking_uri()


def _say_remote_gpu() -> None:
    remote = remote_gpu_url()
    if remote is None:
        return
    _say(f"using the GPU service at RETRAIN_GPU_URL {remote}; not starting the local one")
    if not current_settings().gpu_token:
        _say("RETRAIN_GPU_TOKEN is not set: the clients send the development token")


def _say_remote_mlflow() -> None:
    remote = remote_mlflow_uri()
    if remote is not None:
        _say(f"using the MLflow server at MLFLOW_TRACKING_URI {remote}; not starting a local one")


def _print_ready(server: PostgresServer) -> None:
    base = f"http://{LOOPBACK}:{webserver_port()}"
    home = retrain_home()
    print(
        "\nready\n"
        f"  UI            {base}\n"
        f"  GraphQL       {base}/graphql\n"
        f"  Postgres      {redact_url(server.url)}\n"
        f"  GPU service   {_gpu_service_line()}\n"
        f"  MLflow        {_mlflow_line()}\n"
        f"  Predictions   http://{LOOPBACK}:{serve_port()}\n"
        f"  tokens        {tokens_folder()}/serve and /gpu (owner only; "
        "retrain-assets token serve)\n"
        f"  RETRAIN_HOME  {home}\n"
        f"  logs          {home / 'logs'}/<process>.log\n"
        "Ctrl-C stops everything.\n",
        flush=True,
    )


def _start_and_watch(
    supervisor: Supervisor,
    stop: StopRequests,
    dagster_yaml: Path,
    sockets: Path,
    demo: bool,
    recorder: PlatformRecorder,
) -> int:
    """Start the platform and keep it running until a stop is requested.

    A child that crashes after the start is restarted with backoff; one that crashes too often
    in a short window (see `RestartPolicy`) ends `up` with ChildFailed. `recorder` keeps
    platform.json up to date with every start and restart.
    """
    folders = prepare_dagster_home(dagster_yaml)
    code_server_socket = sockets / SOCKET_NAME
    workspace = write_workspace(folders.home, code_server_socket)
    server = _prepare_databases()
    _record_postgres(recorder, server)
    recorder.endpoints = platform_endpoints(server)
    recorder.update(supervisor)
    demo_on = start_demo(demo and not stop.requested, server.database_url("app"), _say)
    # once: every child gets the same GPU token
    env = demo_environment(child_environment(server, folders), demo_on)
    write_token_files(env)
    _say_remote_gpu()
    _say_remote_mlflow()
    children = platform_children(code_server_socket, workspace, server.database_url("mlflow"))
    ready_timeout = ready_timeout_seconds()
    for spec in [*children, *demo_children(demo_on)]:
        needed = [c for c in supervisor.children if c.spec.name in spec.after_ready]
        if not all(supervisor.wait_ready(c, ready_timeout, lambda: stop.requested) for c in needed):
            return 0
        if stop.requested:
            return 0
        child = supervisor.start(spec, env)
        recorder.update(supervisor)
        _say(f"started {spec.name} (pid {child.process.pid}, output in {child.log})")
    for child in supervisor.children:
        if not supervisor.wait_ready(child, ready_timeout, lambda: stop.requested):
            return 0
    recorder.ready = True
    recorder.update(supervisor)
    _print_ready(server)
    while not stop.requested:
        supervisor.keep_running(_say)
        recorder.update(supervisor)
        time.sleep(WATCH_SECONDS)
    return 0


def _refuse_running_or_clear_stale(home: Path) -> str | None:
    """Return why `up` must not start (this home's platform runs), or clear a dead one's leftovers.

    A record whose `up` was killed (its reaper killed too, or not done yet) still names its
    processes: they are stopped here, so they cannot hold the ports this `up` needs.
    """
    try:
        previous = read_platform_file(home)
    except PlatformFileError as err:
        return str(err)
    if previous is None:
        return None
    if previous.up.is_running():
        return (
            f"another `retrain-assets up` (pid {previous.up.pid}) is running for {home}; stop "
            "it with `retrain-assets down` (or Ctrl-C in its terminal) or set RETRAIN_HOME to "
            "another folder"
        )
    _say(f"the last `up` on {home} (pid {previous.up.pid}) did not stop; stopping what it left")
    report = stop_platform_processes(previous.processes, STOP_GRACE_SECONDS)
    for line in report.lines():
        _say(line)
    forget_handle(home, previous.up.pid)
    remove_platform_file(home)
    return None


def run_up(demo: bool = True) -> int:
    """Run the platform until Ctrl-C or SIGTERM (exit 0) or a child that keeps crashing (exit 1).

    With `demo` the demo tenants land in an empty landing zone; without it nothing is landed.

    Refuses with exit code 2, before starting anything, when a port it needs is taken or another
    `up` runs for the same RETRAIN_HOME (naming its pid and `retrain-assets down`); first stops
    what a killed `up` on this home left. Returns normally in every case, so the embedded
    Postgres stops at interpreter exit. Its reaper (runtime/reaper.py) stops the platform if
    `up` dies without returning.

    Raises:
        SettingsError: a setting is malformed or out of range (the CLI exits 2 naming it).
        FileNotFoundError: dagster.yaml is missing from the checkout.
    """
    check_settings()  # a bad setting is refused (SettingsError) before anything starts
    dagster_yaml, home = repo_file("dagster.yaml"), retrain_home()
    refusal = _refuse_running_or_clear_stale(home)
    if refusal is not None:
        print(f"retrain-assets up: {refusal}", file=sys.stderr, flush=True)
        return 2
    busy = busy_port_messages(needed_ports())
    slurm = training_backend() == "slurm" and not current_settings().slurm_url
    busy += [refused] if slurm and (refused := slurm_refusal()) else []
    if busy:
        for message in busy:
            print(f"retrain-assets up: {message}", file=sys.stderr, flush=True)
        return 2
    try:
        home_lock = lock_home(home)
    except HomeInUse as err:
        print(f"retrain-assets up: {err}", file=sys.stderr, flush=True)
        return 2
    stop = StopRequests()
    stop.install()
    supervisor = Supervisor(home / "logs")
    reaper, reaper_pipe = start_reaper(home, home / "logs" / "reaper.log", STOP_GRACE_SECONDS)
    recorder = PlatformRecorder(home)
    recorder.update(supervisor)
    code, sockets = 0, socket_folder()
    try:
        code = _start_and_watch(supervisor, stop, dagster_yaml, sockets, demo, recorder)
    except ChildFailed as err:
        print(f"retrain-assets up: {err}", file=sys.stderr, flush=True)
        code = 1
    finally:
        if supervisor.children:
            reason = f"on {stop.received[0]}" if stop.requested else "after a failure"
            _say(f"stopping {', '.join(c.spec.name for c in supervisor.children)} {reason}")
            killed = supervisor.stop_all(STOP_GRACE_SECONDS, lambda: stop.urgent)
            if killed:
                _say(f"killed after {STOP_GRACE_SECONDS:.0f} s: {', '.join(killed)}")
        remove_socket_folder(sockets)
        remove_platform_file(home)  # first: the reaper then finds nothing to do
        os.close(reaper_pipe)
        reaper.wait()
        _say("stopped")
        home_lock.close()
    return code
