"""retrain_assets: keep one demand-forecasting model per customer fresh, without training twice."""
