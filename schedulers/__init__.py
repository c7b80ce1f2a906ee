"""Training schedulers fabricmon talks to (SPEC §9.3): Slurm's jobs in, drains and resumes out."""
