"""The Evaluate tab."""
