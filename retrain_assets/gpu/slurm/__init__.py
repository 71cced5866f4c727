"""The Slurm training backend: slurmrestd client, state map, batch job, one-node cluster."""
