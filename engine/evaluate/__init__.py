"""Evaluate a run against its base: evaluations.py stores results and starts the job (no torch); models.py picks
the rows and loads the base and tuned models; scoring.py generates and scores answers; preference.py and rewards.py
score preference and GRPO runs; worker.py is the job's child process."""
