"""The training engine: typed run config, data, models, run directories and the trainer process."""
