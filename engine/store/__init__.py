"""On-disk contracts, standard library only: the run directory, the workspace layout, the engine's child
processes, and paths (local files, hub ids, the folders a browser may reach)."""
