"""`retrain-assets up`: the processes of the local platform, started and stopped as one."""
