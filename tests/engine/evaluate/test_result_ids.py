"""Result ids (Evaluate's and Benchmarks' file names, engine.store.ids) sort in the order the results were made, also
within one second: the latest result is the one listed first."""

from __future__ import annotations

from pathlib import Path

from engine.evaluate.result_files import list_results, save_result
from engine.store.ids import time_id


def test_the_last_result_saved_is_listed_first(tmp_path: Path):
    saved = [save_result(tmp_path, {"id": time_id(), "n": n}) for n in range(50)]
    assert list_results(tmp_path) == saved[::-1]
