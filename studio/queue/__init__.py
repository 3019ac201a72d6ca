"""The run queue as the studio sees it: the thread that starts queued runs as their devices free up (scheduler.py)
and the words that say where a run stands in the line (words.py)."""
