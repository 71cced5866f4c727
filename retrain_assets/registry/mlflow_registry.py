"""MLflow as the model registry: one run per run key, one registered version per run key.

The run key (see `retrain_assets.models.run_key`) is the identity of a training run all over the
platform; here it is the `run_key` tag of the MLflow run and of the registered model version.
Every write first looks the run key up, so a retried Dagster run (or step) finds what an
earlier attempt made instead of making a second one; `registry/audit.py` reports any run key
that still ended up with two runs or two versions (a race between replicas, a hand-made run).

Names: experiment `demand_forecast/<customer>`, registered model `demand_forecast.<customer>`,
the logged model `model` in the run, aliases `challenger` (the latest registered candidate),
`canary` (the version a rollout is trying), `champion` (the deployed one, moved only by a
rollout's promotion) and `previous` (the champion before the last promotion).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import mlflow
import pandas as pd
from mlflow.entities import LoggedModelStatus, Metric
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.tracking._tracking_service.utils import _use_tracking_uri

from retrain_assets.customer_names import validate_customer_name

if TYPE_CHECKING:
    # lightgbm and MLflow's lightgbm flavour (with scikit-learn and scipy) take seconds to
    # import; they are imported where a model is logged or loaded, so a process that only
    # reads the registry (a sensor, the code location's load, a feature run) never pays.
    import lightgbm

EXPERIMENT_PREFIX = "demand_forecast/"
MODEL_PREFIX = "demand_forecast."
RUN_KEY_TAG = "run_key"
CUSTOMER_TAG = "customer"
LOGGED_MODEL_NAME = "model"
PLOT_FOLDER = "plots"
MLMODEL_FILE = "MLmodel"  # the logged model's description; its `metadata` holds the intervals
CHALLENGER = "challenger"
CHAMPION = "champion"
CANARY = "canary"
PREVIOUS = "previous"
DECISION_TAG = "deployment_decision"  # on a version promoted to champion: the decision's id
WITHDRAWN_TAG = "alias_withdrawn"  # version tag: which alias a failed re-gate took, and why
PAGE_SIZE = 1000
_T = TypeVar("_T")


def experiment_name(customer: str) -> str:
    """Return the MLflow experiment of a customer's candidate runs.

    Raises InvalidCustomerName for an unsafe name: a `%` or `_` would widen the registry's
    LIKE searches to other customers, a `/` would nest experiments.
    """
    return f"{EXPERIMENT_PREFIX}{validate_customer_name(customer)}"


def model_name(customer: str) -> str:
    """Return the registered model of a customer's candidates (InvalidCustomerName if unsafe)."""
    return f"{MODEL_PREFIX}{validate_customer_name(customer)}"


def quoted(value: str) -> str:
    """Return `value` as a filter-string literal; refuse quotes instead of escaping them."""
    if "'" in value or '"' in value:
        raise ValueError(f"refusing a quote in an MLflow filter value: {value!r}")
    return f"'{value}'"


@contextlib.contextmanager
def process_tracking_uri(uri: str) -> Iterator[None]:
    """Point MLflow's process-wide tracking URI at `uri` for a block, then put it back.

    MLflow's own `_use_tracking_uri` restores its module variable but, when that was unset,
    also deletes the MLFLOW_TRACKING_URI environment variable (`up` sets it for every child),
    so the variable is saved and restored here as well.
    """
    saved = os.environ.get("MLFLOW_TRACKING_URI")
    try:
        with _use_tracking_uri(uri):
            yield
    finally:
        if saved is not None:
            os.environ["MLFLOW_TRACKING_URI"] = saved


@contextlib.contextmanager
def no_distribution_scan() -> Iterator[None]:
    """Let MLflow check pinned requirements without scanning every installed distribution.

    `log_model` warns when the environment does not satisfy the model's requirements; to do
    so MLflow first maps every module of every installed distribution to its package
    (`importlib_metadata.packages_distributions()`, reading each distribution's file list),
    once per process: a third of a candidate run's time in a fresh run process (BENCHMARKS.md,
    the hand-off). Our requirements are pinned by name, and MLflow reads a named package's
    version without that map, so for the call the map is empty (MLflow 3.17's module cache,
    `mlflow.utils.requirements_utils._MODULES_TO_PACKAGES`) and is put back afterwards, so a
    later inference of requirements in the process builds it as usual.
    """
    from mlflow.utils import requirements_utils

    saved = requirements_utils._MODULES_TO_PACKAGES
    if saved is None:
        requirements_utils._MODULES_TO_PACKAGES = {}  # type: ignore[assignment]  # typed None
    try:
        yield
    finally:
        if saved is None:
            requirements_utils._MODULES_TO_PACKAGES = None


def all_pages(search: Callable[[str | None], list[_T]]) -> Iterator[_T]:
    """Yield every item of a paged MLflow search (`search(page_token)` returns a PagedList)."""
    token: str | None = None
    while True:
        page = search(token)
        yield from page
        token = getattr(page, "token", None)
        if not token:
            return


class MlflowRegistry:
    """Candidate runs, logged models and registered versions on one MLflow tracking server."""

    def __init__(self, tracking_uri: str) -> None:
        """Talk to the server at `tracking_uri` (no process-wide MLflow state is changed)."""
        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)

    # -- runs ---------------------------------------------------------------------------------

    def experiment_id(self, customer: str) -> str:
        """Return the id of the customer's experiment, creating it on first use."""
        name = experiment_name(customer)
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name, tags={CUSTOMER_TAG: customer})
        except MlflowException:  # another process created it between our look-up and create
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def runs_of(self, customer: str, run_key: str) -> list[mlflow.entities.Run]:
        """Return the active runs tagged with this run key, oldest first."""
        experiment = self.experiment_id(customer)
        runs = all_pages(
            lambda token: self.client.search_runs(
                [experiment],
                filter_string=f"tags.{RUN_KEY_TAG} = {quoted(run_key)}",
                max_results=PAGE_SIZE,
                page_token=token,
            )
        )
        return sorted(runs, key=lambda run: (run.info.start_time, run.info.run_id))

    def candidate_run(
        self, customer: str, run_key: str, tags: Mapping[str, str] | None = None
    ) -> str:
        """Return the id of the run key's MLflow run, creating it (with `tags`) if it has none.

        The run is tagged `customer` and `run_key`, plus `tags` (snapshot_id, decision_id...)
        when it is created; an existing run is returned unchanged. Should two callers race and
        both create one, each re-reads the runs and the younger run is deleted, so both return
        the oldest.
        """
        existing = self.runs_of(customer, run_key)
        if existing:
            return existing[0].info.run_id
        all_tags = {**(tags or {}), CUSTOMER_TAG: customer, RUN_KEY_TAG: run_key}
        created = self.client.create_run(
            self.experiment_id(customer), tags=all_tags, run_name=f"{customer}-{run_key}"
        )
        self.client.set_terminated(created.info.run_id)  # a record, not a running process
        oldest = self.runs_of(customer, run_key)[0].info.run_id
        if oldest != created.info.run_id:
            self.client.delete_run(created.info.run_id)
        return oldest

    def log_metrics(self, run_id: str, metrics: Mapping[str, float]) -> None:
        """Log metrics into a run in one call (the same values again on a retry)."""
        now = int(time.time() * 1000)
        self.client.log_batch(
            run_id,
            metrics=[Metric(name, float(value), now, 0) for name, value in metrics.items()],
        )

    # -- models -------------------------------------------------------------------------------

    def logged_model_id(self, run_id: str) -> str | None:
        """Return the id of the model `log_candidate` logged in this run (READY), if any."""
        ready = self._logged_models(run_id, LoggedModelStatus.READY)
        return ready[0].model_id if ready else None

    def _logged_models(
        self, run_id: str, status: LoggedModelStatus
    ) -> list[mlflow.entities.LoggedModel]:
        return [m for m in self._run_models(run_id) if m.status == status]

    def _run_models(
        self, run_id: str, experiment_id: str | None = None
    ) -> list[mlflow.entities.LoggedModel]:
        """Return the run's logged models named `model`, oldest first (one search)."""
        # Not `status = 'READY'` in the filter: on Postgres MLflow 3.17 compares the string to
        # the integer column and the server answers 400; the few models of a run are filtered
        # by the callers instead.
        if experiment_id is None:
            experiment_id = self.client.get_run(run_id).info.experiment_id
        return self.client.search_logged_models(
            experiment_ids=[experiment_id],
            filter_string=(
                f"source_run_id = {quoted(run_id)} AND name = {quoted(LOGGED_MODEL_NAME)}"
            ),
            order_by=[{"field_name": "creation_timestamp", "ascending": True}],
        )

    def log_candidate(
        self,
        run_id: str,
        model_path: Path | str | lightgbm.Booster,
        metrics: Mapping[str, float],
        signature_example: pd.DataFrame,
        plot_png: bytes | None = None,
        model_metadata: Mapping[str, object] | None = None,
    ) -> str:
        """Log a LightGBM text model, its metrics and plot into the run; return the model id.

        The model is logged as the MLflow model `model`, with an input signature inferred from
        `signature_example` (a few rows of the features it predicts from) and `model_metadata`
        in its MLmodel file (the prediction intervals it carries). A run that already
        has its model returns that model's id and logs nothing: the model is logged last, so
        its presence means the metrics and the plot are there too. A retry after a failure in
        the middle logs the metrics again (same values) and reuses an unfinished model record.
        """
        # One run read and one model search serve both questions (is the model logged, is an
        # unfinished record there to reuse): each MLflow call is a round trip to the server.
        experiment = self.client.get_run(run_id).info.experiment_id
        models = self._run_models(run_id, experiment)
        done = [m.model_id for m in models if m.status == LoggedModelStatus.READY]
        if done:
            return done[0]
        import lightgbm
        import mlflow.lightgbm
        from mlflow.models import infer_signature

        booster = (
            model_path
            if isinstance(model_path, lightgbm.Booster)
            else lightgbm.Booster(model_file=str(model_path))
        )
        self.log_metrics(run_id, metrics)
        if plot_png is not None:
            with tempfile.TemporaryDirectory() as folder:
                plot = Path(folder) / "forecast.png"
                plot.write_bytes(plot_png)
                self.client.log_artifact(run_id, str(plot), artifact_path=PLOT_FOLDER)
        pending = [m.model_id for m in models if m.status == LoggedModelStatus.PENDING]
        if pending:
            model_id = pending[0]
        else:
            model_id = self.client.create_logged_model(
                experiment, name=LOGGED_MODEL_NAME, source_run_id=run_id
            ).model_id
        # mlflow.lightgbm.log_model has no client argument: it reads the process-wide tracking
        # URI, so it is pointed at ours for this call only and restored afterwards.
        with process_tracking_uri(self.tracking_uri), no_distribution_scan():
            mlflow.lightgbm.log_model(
                booster,
                name=LOGGED_MODEL_NAME,
                signature=infer_signature(signature_example),
                # the flavor's pinned lightgbm: inferring the requirements instead loads the
                # model in a subprocess and scans every installed package (15-25 s a model)
                pip_requirements=mlflow.lightgbm.get_default_pip_requirements(),
                metadata=dict(model_metadata) if model_metadata else None,
                model_id=model_id,
                run_id=run_id,
            )
        return model_id

    def set_model_metadata(self, run_id: str, key: str, value: object) -> bool:
        """Set one entry of the metadata in the run's logged model's MLmodel file.

        The gate widens a first model's prediction intervals after `log_candidate` logged the
        trainer's; the service reads them from this file, so the entry is rewritten there,
        before the model is registered. Returns False when the entry already held `value`
        (nothing is written: a retried gate changes nothing).

        Raises:
            ValueError: the run has no logged model (call `log_candidate` first).
        """
        model_id = self.logged_model_id(run_id)
        if model_id is None:
            raise ValueError(f"run {run_id} has no logged model: log_candidate first")
        import mlflow.artifacts
        from mlflow.models import Model

        location = self.client.get_logged_model(model_id).artifact_location
        with process_tracking_uri(self.tracking_uri), tempfile.TemporaryDirectory() as folder:
            local = mlflow.artifacts.download_artifacts(
                artifact_uri=f"{location.rstrip('/')}/{MLMODEL_FILE}", dst_path=folder
            )
            model = Model.load(local)
            metadata = dict(model.metadata or {})
            if metadata.get(key) == value:
                return False
            model.metadata = {**metadata, key: value}
            model.save(local)
            self.client.log_model_artifact(model_id, local)
        return True

    # -- registry -----------------------------------------------------------------------------

    def _ensure_registered_model(self, name: str, customer: str) -> None:
        with contextlib.suppress(MlflowException):  # it exists already (or was just created)
            self.client.create_registered_model(name, tags={CUSTOMER_TAG: customer})
        self.client.get_registered_model(name)  # raises if the create failed for another reason

    def versions_of(
        self, customer: str, run_key: str
    ) -> list[mlflow.entities.model_registry.ModelVersion]:
        """Return the registered versions tagged with this run key, lowest version first.

        Each is read again by number: version search leaves `aliases` empty.
        """
        name = model_name(customer)
        found = self.client.search_model_versions(
            f"name = {quoted(name)} AND tags.{RUN_KEY_TAG} = {quoted(run_key)}"
        )
        numbers = sorted(int(version.version) for version in found)
        return [self.client.get_model_version(name, str(number)) for number in numbers]

    def register(self, customer: str, run_key: str, run_id: str) -> str:
        """Register the run's logged model as a version of `demand_forecast.<customer>`.

        Returns the version number. A run key that has a version already returns it: a
        version is created once per run key, tagged `run_key`, and the alias `challenger` is
        set to it. A retry after a crash between the two finds the version without any alias
        and sets `challenger` if no later version exists. Should two callers race, the higher
        version is deleted and both return the lower.

        Raises:
            ValueError: the run has no logged model (call `log_candidate` first).
        """
        name = model_name(customer)
        self._ensure_registered_model(name, customer)
        existing = self.versions_of(customer, run_key)
        if existing:
            version = existing[0]
            if not version.aliases and self._latest_version(name) == int(version.version):
                self.client.set_registered_model_alias(name, CHALLENGER, version.version)
            return version.version
        model_id = self.logged_model_id(run_id)
        if model_id is None:
            raise ValueError(f"run {run_id} has no logged model: log_candidate before register")
        created = self.client.create_model_version(
            name,
            source=f"models:/{model_id}",
            run_id=run_id,
            tags={RUN_KEY_TAG: run_key, CUSTOMER_TAG: customer},
            model_id=model_id,
        )
        lowest = self.versions_of(customer, run_key)[0].version
        if lowest != created.version:
            self.client.delete_model_version(name, created.version)
            return lowest
        self.client.set_registered_model_alias(name, CHALLENGER, created.version)
        return created.version

    def _latest_version(self, name: str) -> int:
        versions = self.client.search_model_versions(f"name = {quoted(name)}")
        return max((int(version.version) for version in versions), default=0)

    def champion(self, customer: str) -> tuple[str, str] | None:
        """Return the `champion` version of the customer's model and a URI pinned to it.

        None when the customer has no registered model or no champion yet. The URI names the
        version (`models:/demand_forecast.<customer>/<version>`), not the alias, so a promotion
        between this call and loading the model cannot change what is loaded.
        """
        version = self.aliases(customer).get(CHAMPION)
        if version is None:
            return None
        return version, f"models:/{model_name(customer)}/{version}"

    # -- deployment aliases -----------------------------------------------------------------

    def aliases(self, customer: str) -> dict[str, str]:
        """Return alias -> version of the customer's model ({} when nothing is registered).

        Read from the registered model, not `get_model_version_by_alias`: a missing alias is
        a generic INVALID_PARAMETER_VALUE there, not to be told apart from a real error.
        """
        try:
            model = self.client.get_registered_model(model_name(customer))
        except MlflowException as err:
            if err.error_code == "RESOURCE_DOES_NOT_EXIST":
                return {}
            raise
        return {alias: str(version) for alias, version in model.aliases.items()}

    def set_canary(self, customer: str, version: str) -> None:
        """Point alias `canary` at the version a rollout is trying (again: no change)."""
        self.client.set_registered_model_alias(model_name(customer), CANARY, version)

    def remove_canary(self, customer: str) -> None:
        """Remove alias `canary` (a rollout ended); nothing happens when it is not set."""
        if CANARY in self.aliases(customer):
            self.client.delete_registered_model_alias(model_name(customer), CANARY)

    def promote(self, customer: str, version: str, previous: str | None, decision_id: int) -> None:
        """Make `version` the champion for a deployment decision; repeating it changes nothing.

        The old champion keeps alias `previous`; the version is tagged with the decision
        (`deployment_decision`), so the audit can match the alias to its decision; `canary`
        is removed.
        """
        name = model_name(customer)
        self.client.set_model_version_tag(name, version, DECISION_TAG, str(decision_id))
        if previous is not None and previous != version:
            self.client.set_registered_model_alias(name, PREVIOUS, previous)
        self.client.set_registered_model_alias(name, CHAMPION, version)
        self.remove_canary(customer)

    def load_champion(self, customer: str) -> tuple[str, lightgbm.Booster] | None:
        """Return the champion's version and its model, loaded now from the registry."""
        found = self.champion(customer)
        if found is None:
            return None
        version, uri = found
        import mlflow.lightgbm

        # load_model has no client argument: point the process-wide URI at ours for the call
        with process_tracking_uri(self.tracking_uri):
            return version, mlflow.lightgbm.load_model(uri)

    def aliased_version(
        self, customer: str, alias: str
    ) -> mlflow.entities.model_registry.ModelVersion | None:
        """Return the version holding `alias` (with its tags), None without a model or alias."""
        version = self.aliases(customer).get(alias)
        if version is None:
            return None
        return self.client.get_model_version(model_name(customer), version)

    def load_version(self, customer: str, version: str) -> lightgbm.Booster:
        """Return the model of one registered version, loaded now (a URI pinned to the number)."""
        import mlflow.lightgbm

        with process_tracking_uri(self.tracking_uri):
            return mlflow.lightgbm.load_model(f"models:/{model_name(customer)}/{version}")

    def load_version_with_metadata(
        self, customer: str, version: str
    ) -> tuple[lightgbm.Booster, dict[str, Any]]:
        """Return one registered version's model and its MLmodel metadata ({}: none), one download.

        The prediction service reads the model's prediction intervals from the metadata; a
        version logged before them has none.
        """
        import mlflow.artifacts
        import mlflow.lightgbm
        from mlflow.models import Model

        uri = f"models:/{model_name(customer)}/{version}"
        with process_tracking_uri(self.tracking_uri), tempfile.TemporaryDirectory() as folder:
            local = mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=folder)
            booster = mlflow.lightgbm.load_model(local)
            metadata = Model.load(local).metadata or {}
        return booster, dict(metadata)

    def withdraw_alias(self, customer: str, alias: str, version: str, reason: str) -> bool:
        """Remove `alias` if it still points at `version`; tag the version with the reason.

        Returns True when this call removed it. The tag `alias_withdrawn` (`<alias>: <reason>`)
        stays on the version, so the registry itself says why it lost the alias.
        """
        current = self.aliased_version(customer, alias)
        if current is None or str(current.version) != str(version):
            return False
        name = model_name(customer)
        self.client.set_model_version_tag(name, str(version), WITHDRAWN_TAG, f"{alias}: {reason}")
        self.client.delete_registered_model_alias(name, alias)
        return True
