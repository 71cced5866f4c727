"""The reference remote GPU training service: an HTTP API, Postgres-backed jobs, worker processes.

`retrain_assets.gpu.service.app.serve` starts it (the CLI's `gpu-service` and
`python -m retrain_assets.gpu.service` both call it). This package stays import-light because
every worker process imports it too.
"""
