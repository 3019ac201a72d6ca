"""The Gradio studio (built on the engine)."""
