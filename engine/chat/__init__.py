"""Chat with a base model or a run: client.py is what the studio imports (no torch); worker.py is the child
process that holds the model."""
