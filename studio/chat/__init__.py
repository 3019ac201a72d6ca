"""The Chat tab."""
