"""retrain_assets: keep one demand-forecasting model per customer fresh, without training twice."""

from retrain_assets.known_warnings import silence_known_warnings

silence_known_warnings()  # before any module declares an asset (known_warnings.py says why)
