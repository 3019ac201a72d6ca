"""Evaluate a run against its base: evaluations.py stores results and starts the job (no torch); scoring.py
generates and scores answers; worker.py is the job's child process."""
