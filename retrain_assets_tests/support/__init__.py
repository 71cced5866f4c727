"""What every test folder shares: waiting on events, processes, the running platform, UI actions.

- `waiting`: deadlines that stretch on a busy machine (`patience`, `wait_until`,
  `wait_for_line`);
- `processes`: free ports, starting a server until it answers, stopping a process or its group;
- `platform`: `retrain-assets up` for a test (`running_platform`) and its GraphQL API;
- `ui_actions`: launching runs and backfills through that API, as the Dagster UI does;
- `mlflow_server`: a real `mlflow server` on the test Postgres.

Test modules import helpers from here (or from a helper module of their folder), never from
another test module.
"""
