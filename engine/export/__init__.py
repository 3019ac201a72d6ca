"""Export a run: exports.py checks the request and starts the job (no torch); worker.py copies or merges the
weights in the job's child process; model_card.py writes the README that goes with them; gguf/ writes the GGUF
file and Ollama Modelfile of the gguf kinds."""
