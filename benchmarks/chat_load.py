"""Loading a model into Chat cold against forked from the warm server (engine.store.forks), arms alternated.

Each round loads the bundled demo model into a ``ChatClient`` twice, as the Chat tab's Load does: once with
``STUDIO_WARM_FORKS=0`` (a cold ``python -m engine chat-worker`` that imports torch and transformers), once with
the worker handed to the machine's fork server, brought up before the first round as a studio does when it opens.
Per arm: Load -> model ready (wall seconds) and the first reply's first token. Keep the machine otherwise idle.

    python benchmarks/chat_load.py              # 4 rounds
    python benchmarks/chat_load.py --rounds 6
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engine.chat.client import ChatClient, ModelSpec, SamplingParams  # noqa: E402
from engine.store import forks  # noqa: E402
from engine.store.processes import engine_env  # noqa: E402

DEMO = str(ROOT / "assets" / "demo-model")


def one_load(warm: bool) -> tuple[float, float]:
    """Seconds from Load to ready, and from then to the first token of a reply."""
    os.environ[forks.SWITCH_ENV] = "1" if warm else "0"  # the chat worker's own environment decides
    client = ChatClient()
    started = time.monotonic()
    for _ in client.load(ModelSpec(base=DEMO)):
        pass
    ready = time.monotonic()
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    next(iter(client.generate(messages, SamplingParams(temperature=0, max_new_tokens=8))))
    first_token = time.monotonic()
    client.unload()
    return ready - started, first_token - ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    os.environ[forks.SWITCH_ENV] = "1"
    started = time.monotonic()
    if not forks.prepare(holder=os.getpid()) or not forks.wait_for_server(forks.server_key(engine_env()), 120):
        sys.exit("no fork server on this machine (Linux only; STUDIO_WARM_FORKS=0 turns it off)")
    print(f"fork server ready in {time.monotonic() - started:.1f} s (paid once, when the studio opens)")
    results: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": []}
    for round_number in range(args.rounds):
        order = ("cold", "warm") if round_number % 2 == 0 else ("warm", "cold")
        for arm in order:
            results[arm].append(one_load(arm == "warm"))
        print(f"round {round_number + 1}: " + ", ".join(f"{arm} load {results[arm][-1][0]:.2f} s" for arm in order))
    for arm, values in results.items():
        loads, tokens = [v[0] for v in values], [v[1] for v in values]
        load, token = statistics.median(loads), statistics.median(tokens)
        print(f"{arm}: load median {load:.2f} s, first token median {token:.2f} s")
    cold, warm = (statistics.median(v[0] for v in results[arm]) for arm in ("cold", "warm"))
    print(f"warm / cold load time: {warm / cold:.2f}")


if __name__ == "__main__":
    main()
