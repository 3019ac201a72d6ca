"""One line per item of the GPU check (benchmarks/gpu_check.sh), read from the files its steps left in a folder.

    python benchmarks/gpu_summary.py WORK_DIR [--json OUT/summary.json]

WORK_DIR holds what the steps wrote: ``throughput-87m.json`` and ``throughput-1b.json`` (throughput_real.py
--json), ``memory_estimate.txt``, ``gpu-tests.xml`` (pytest's JUnit report), ``STEP.exit`` (each step's exit
status: 124 when its time limit cut it) and ``sweep.skipped`` (why the sweep test did not run: optuna not
carried). Each line says ``ok``, gives the figures, or ``FAILED: why``; a goal the figures miss is written NOT MET.
Nothing here is measured: it only reads.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput_real import GOALS  # noqa: E402

# The variants the check measures against the engine's own path at 87M (benchmarks/README.md, GPU figures).
VARIANTS = ("engine-free", "engine-flex", "engine-grouped", "engine-fp32-weights", "engine-cudnn")
MEMORY_ROW = re.compile(r"^(\S+)\s+\d+\s+[\d.]+GB\s+[\d.]+GB\s+([\d.]+)\s+(yes|NO)\b")
MEMORY_FAILED = re.compile(r"^(\S+)\s+FAILED: (.*)$")
SWEEP_TEST = "test_a_two_trial_sweep_completes_both_trials"  # tests/gpu/test_sweep_gpu.py


def step_trouble(work: Path, step: str) -> str:
    """Why a step left no figures, from its exit status."""
    path = work / f"{step}.exit"
    if not path.is_file():
        return "the step did not run"
    code = path.read_text().strip()
    return "cut by its time limit" if code in ("124", "137") else f"exit status {code}"


def load_figures(work: Path, model: str) -> dict[str, Any] | None:
    path = work / f"throughput-{model}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def median(figures: dict[str, Any], arm: str) -> float | None:
    return (figures["arms"].get(arm) or {}).get("median")


def rate_text(value: float | None) -> str:
    return "not measured" if value is None else f"{value:,.0f} tokens/s"


def goal_text(figures: dict[str, Any], arm: str) -> str:
    """The engine's ratio to ``arm`` with its interval and the goal, e.g. ``1.62 (1.50-1.70; goal >= 1.5 met)``."""
    ratio = figures["engine_ratios"].get(arm)
    if ratio is None:
        return "not measured"
    interval = f"{ratio['low']:.2f}-{ratio['high']:.2f}" if figures["rounds"] > 1 else "one round, no interval"
    goal = GOALS[figures["model"]].get(arm)
    verdict = "" if goal is None else f"; goal >= {goal} {'met' if ratio['of_medians'] >= goal else 'NOT MET'}"
    return f"{ratio['of_medians']:.2f} ({interval}{verdict})"


def memory_text(figures: dict[str, Any]) -> str:
    """Peak memory of the engine against the bare arm (the goal: no more)."""
    engine, bare = ((figures["arms"].get(arm) or {}).get("peak_mib") for arm in ("engine", "bare"))
    if engine is None or bare is None:
        return "peak memory not measured"
    return f"peak {engine:,.0f} vs bare {bare:,.0f} MiB ({'met' if engine <= bare else 'NOT MET'})"


def goals_line(work: Path, model: str) -> str:
    """The engine against the bare script and TRL's defaults at one size: ratios, goals, peak memory."""
    figures = load_figures(work, model)
    if figures is None or median(figures, "engine") is None:
        return f"FAILED: no engine figure ({step_trouble(work, f'throughput-{model}')})"
    return (
        f"engine {rate_text(median(figures, 'engine'))} on {figures['device']}, {figures['rounds']} round(s); "
        f"engine / bare {goal_text(figures, 'bare')}; engine / trl-defaults {goal_text(figures, 'trl-defaults')}; "
        f"{memory_text(figures)}"
    )


def attention_line(work: Path) -> str:
    """Item 1: the engine's path (sdpa without cuDNN) and each measured variant as a multiple of it at 87M."""
    figures = load_figures(work, "87m")
    engine = median(figures, "engine") if figures else None
    if figures is None or engine is None:
        return f"FAILED: no engine figure at 87M ({step_trouble(work, 'throughput-87m')})"
    sdpa = path_part(figures["arms"]["engine"]["path"], "sdpa")
    parts = [f"engine {rate_text(engine)} ({sdpa})"]
    for arm in VARIANTS:
        if arm in figures["arms"]:
            value = median(figures, arm)
            parts.append(f"{arm} {'not measured' if value is None else f'{value / engine:.2f}x'}")
    measured = {arm: median(figures, arm) for arm in ("engine", *VARIANTS) if median(figures, arm) is not None}
    return "; ".join([*parts, f"fastest: {max(measured, key=measured.__getitem__)}"])


def path_part(path: str | None, word: str) -> str:
    """The part of a path line (engine.training.run_path) that starts with ``word``, its parentheses included."""
    found = re.search(rf"\b{word} [^,(]*(?:\([^)]*\))?", path or "")
    return found.group(0).strip() if found else f"{word} ?"


def liger_line(work: Path) -> str:
    """Item 2: what auto picked at each size (from the engine's path line) and what Liger changed."""
    parts = []
    for model, other in (("87m", "engine-liger"), ("1b", "engine-no-liger")):
        figures = load_figures(work, model)
        if figures is None:
            parts.append(f"{model}: not measured")
            continue
        chosen = path_part((figures["arms"].get("engine") or {}).get("path"), "liger")
        engine, variant = median(figures, "engine"), median(figures, other)
        if engine is None or variant is None:
            parts.append(f"{model}: auto {chosen}; {other} not measured")
            continue
        with_liger, without = (engine, variant) if chosen.startswith("liger on") else (variant, engine)
        parts.append(f"{model}: auto {chosen}; with / without Liger {with_liger / without:.2f}x")
    return "; ".join(parts)


def tests_line(work: Path) -> str:
    """Item 4: the GPU tests (every method, Chat, Evaluate, export; the CUDA loss-equality test)."""
    path = work / "gpu-tests.xml"
    if not path.is_file():
        return f"FAILED: no test report ({step_trouble(work, 'gpu-tests')})"
    cases = list(ElementTree.parse(path).getroot().iter("testcase"))
    failed = []
    skipped = 0
    for case in cases:
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        if problem is not None:
            message = (problem.get("message") or problem.text or "").strip().splitlines()
            failed.append(f"{case.get('name')} ({message[0][:120] if message else 'no message'})")
        skipped += case.find("skipped") is not None
    passed = len(cases) - len(failed) - skipped
    if failed:
        return f"FAILED: {len(failed)} of {len(cases)}: " + "; ".join(failed)
    cut = "" if step_trouble(work, "gpu-tests") == "exit status 0" else f" ({step_trouble(work, 'gpu-tests')})"
    return f"ok: {passed} passed, {skipped} skipped{cut}" if passed else f"FAILED: none passed{cut}"


def sweep_line(work: Path) -> str:
    """Item 4: the two-trial sweep test (it needs optuna, which the check may not carry: then skipped, and why)."""
    skipped = work / "sweep.skipped"
    if skipped.is_file():
        return f"skipped: {skipped.read_text(errors='replace').strip()}"
    path = work / "gpu-tests.xml"
    if not path.is_file():
        return f"FAILED: no test report ({step_trouble(work, 'gpu-tests')})"
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        if case.get("name") != SWEEP_TEST:
            continue
        for outcome, verdict in (("failure", "FAILED"), ("error", "FAILED"), ("skipped", "skipped")):
            found = case.find(outcome)
            if found is not None:
                message = (found.get("message") or found.text or "").strip().splitlines()
                return f"{verdict}: {message[0][:120] if message else 'no message'}"
        return "ok (among the tests above)"
    return f"FAILED: not in the test report ({step_trouble(work, 'gpu-tests')})"


def memory_line(work: Path) -> str:
    """Item 4: the memory estimate's rows against the measured peaks (every ratio within 0.8-1.2)."""
    path = work / "memory_estimate.txt"
    text = path.read_text(errors="replace") if path.is_file() else ""
    rows = [match.groups() for line in text.splitlines() if (match := MEMORY_ROW.match(line))]
    broken = [match.groups() for line in text.splitlines() if (match := MEMORY_FAILED.match(line))]
    if not rows and not broken:
        return f"FAILED: no rows ({step_trouble(work, 'memory')})"
    misses = [f"{name} {ratio}" for name, ratio, ok in rows if ok == "NO"]
    misses += [f"{name} failed: {why[:80]}" for name, why in broken]
    eight_bit = ", ".join(f"{name} {ratio}" for name, ratio, _ in rows if name.startswith("qlora-8bit"))
    within = len(rows) - sum(ok == "NO" for _, _, ok in rows)
    total = len(rows) + len(broken)
    head = f"{within} of {total} within 0.8-1.2" + (f" (8-bit: {eight_bit})" if eight_bit else "")
    return f"FAILED: {head}; off: {', '.join(misses)}" if misses else f"ok: {head}"


def summary(work: Path) -> dict[str, str]:
    """Every line, by item."""
    return {
        "1 attention off cuDNN, 87M variants": attention_line(work),
        "1 goals at 87M": goals_line(work, "87m"),
        "2 Liger by width": liger_line(work),
        "3 goals at ~1B": goals_line(work, "1b"),
        "4 every method on the GPU": tests_line(work),
        "4 two-trial sweep": sweep_line(work),
        "4 memory estimate": memory_line(work),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="the folder the check's steps wrote to")
    parser.add_argument("--json", type=Path, help="also write the lines and the figures to this file")
    args = parser.parse_args()
    lines = summary(args.work)
    for item, line in lines.items():
        print(f"{item}: {line}")
    if args.json:
        figures = {model: load_figures(args.work, model) for model in ("87m", "1b")}
        args.json.write_text(json.dumps({"lines": lines, "figures": figures}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
