"""Demo mode: the rules of a public studio that strangers share (policy.py), and its queue (queue.py)."""
