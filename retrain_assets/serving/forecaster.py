"""A loaded model version and how it predicts from the service's feature matrix.

Requests carry every feature of MODEL_FEATURES, in that order, as one float matrix; a model
reads the columns it was trained on, by name. A model that needs a feature the service does
not take (trained on another feature definition) cannot predict: that is a prediction failure,
logged and answered 500, never a silent column mix-up.
"""

from __future__ import annotations

from dataclasses import dataclass

import lightgbm
import numpy as np

from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.prediction_intervals import IntervalTable


class PredictionFailed(Exception):
    """The model could not make its predictions; the message says why."""


@dataclass(frozen=True)
class Forecaster:
    """One (customer, version) LightGBM model, ready to predict."""

    customer: str
    version: str
    booster: lightgbm.Booster
    columns: tuple[int, ...]
    unknown_features: tuple[str, ...]
    intervals: IntervalTable | None = None  # None: logged before the trainer computed them

    @classmethod
    def of(
        cls,
        customer: str,
        version: str,
        booster: lightgbm.Booster,
        intervals: IntervalTable | None = None,
    ) -> Forecaster:
        """Return the forecaster of a loaded booster, its features mapped onto MODEL_FEATURES."""
        names = booster.feature_name()
        known = [name for name in names if name in MODEL_FEATURES]
        unknown = tuple(name for name in names if name not in MODEL_FEATURES)
        columns = tuple(MODEL_FEATURES.index(name) for name in known)
        return cls(customer, version, booster, columns, unknown, intervals)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Return one prediction per row of `features` (rows x MODEL_FEATURES, NaN = missing).

        Predictions that are not finite are returned as they are.

        Raises:
            PredictionFailed: the model needs a feature the service does not take, or LightGBM
                failed; the message names the version and the reason.
        """
        if self.unknown_features:
            raise PredictionFailed(
                f"model version {self.version} of {self.customer} needs feature(s) "
                f"{', '.join(self.unknown_features)}, which the service does not take "
                f"(it takes {', '.join(MODEL_FEATURES)})"
            )
        try:
            predictions = self.booster.predict(features[:, self.columns], num_threads=1)
        except (lightgbm.basic.LightGBMError, ValueError, TypeError) as error:
            raise PredictionFailed(
                f"model version {self.version} of {self.customer} failed to predict: {error}"
            ) from error
        return np.asarray(predictions, dtype="float64")
