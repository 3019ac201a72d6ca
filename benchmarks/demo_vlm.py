"""Does the vision-language demo preset teach the demo VLM to read its images? Train it through the engine, then
compare held-out exact match, base against tuned (benchmarks/demo_accuracy.py does the work).

Trains ``assets/presets/demo-vlm.yaml`` (the bundled tiny LLaVA, ``assets/demo-vlm/``, on the coloured shapes of
``assets/datasets/demo_vlm_*.jsonl``) with ``python -m engine train`` as a user would, timing it end to end, then
asks every held-out question with its image, greedily, of the base model and of the tuned one.

    python benchmarks/demo_vlm.py
    python benchmarks/demo_vlm.py --keep runs/demo-vlm

Goals on 2 CPU cores: the run finishes in at most 3 minutes; base at most 20%, tuned at least 80%.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_accuracy import report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", type=Path, default=ROOT / "assets" / "presets" / "demo-vlm.yaml")
    parser.add_argument("--keep", type=Path, help="keep the run directory here instead of a temporary one")
    args = parser.parse_args()
    report(args.preset, args.keep, goal_seconds=180)


if __name__ == "__main__":
    main()
