"""The Sweeps tab: build, start, watch, stop and continue hyperparameter sweeps (engine.sweeps)."""
