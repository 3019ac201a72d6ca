"""The studio process's resident memory around each hostile payload a public demo's visitor can send.

Each payload goes through the call the studio makes for it, in this one process as the studio would: a chat
template whose never-run branch folds to gigabytes (the dataset check with the tokenizer, which compiles the
template with transformers), a nested regex reward (the config check run on every form change), a 523-byte
Parquet file that holds 1.5 GB of rows (the dataset check). For each: the resident set before (after a benign
call of the same kind, so imports and caches are counted out), the peak while it ran (sampled every 10 ms), the
resident set after (garbage collected), and what the studio answered.

    python benchmarks/hostile_memory.py
    PYTHONPATH=/path/to/older/tree python benchmarks/hostile_memory.py     # the same payloads on another tree

The goal (a public demo): after each, the resident set is back within 100 MB of before.
"""

from __future__ import annotations

import contextlib
import gc
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 2**20
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def measured(call: Callable[[], Any]) -> tuple[int, int, int, str]:
    """(before, peak, after) resident bytes around ``call``, and its answer (its error's first line)."""
    gc.collect()
    before, peak, done = rss(), [rss()], threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        answer = f"accepted: {call()!r}"[:100]
    except Exception as exc:  # the refusal is the expected answer
        answer = f"refused: {str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__}"[:160]
    done.set()
    sampler.join()
    gc.collect()
    return before, max(peak[0], rss()), rss(), answer


def parquet_bomb(folder: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    column = pa.DictionaryArray.from_arrays(pa.array([0] * 1500, pa.int32()), pa.array(["x" * MB]))
    path = folder / "bomb.parquet"
    pq.write_table(pa.table({"text": column}), path, compression="zstd")
    return path


Payload = tuple[str, Callable[[], Any], Callable[[], Any]]  # its name, a benign call of its kind, the hostile one


def payloads(scratch: Path) -> list[Payload]:
    """Each hostile payload as the studio calls it, beside a benign call of the same kind (files in ``scratch``)."""
    from engine.api import inspect_run_data, parse_config
    from engine.training.modeling import load_tokenizer

    config = parse_config({})
    tokenizer = load_tokenizer(config)
    data = config.data

    def check_with_template(template: str) -> Callable[[], Any]:
        return lambda: inspect_run_data(
            parse_config({"data": {**data.model_dump(), "chat_template": template}}), tokenizer
        )

    def many_templates() -> None:  # many distinct templates: transformers caches 128 compiled ones
        for number in range(20):
            with contextlib.suppress(Exception):
                check_with_template(f"{{% if false %}}{{{{ 'x{number}' * 40000000 }}}}{{% endif %}}" + CHATML)()

    def regex_reward(pattern: str) -> Callable[[], Any]:
        return lambda: parse_config({"method": "grpo", "grpo": {"rewards": [{"kind": "regex", "pattern": pattern}]}})

    bomb = parquet_bomb(scratch)
    small = scratch / "small.jsonl"
    small.write_text('{"text": "a short row"}\n' * 8)

    def rows_of(path: Path) -> Callable[[], Any]:
        return lambda: inspect_run_data(parse_config({"data": {"path": str(path), "format": "text"}}))

    def demo_upload(path: Path) -> Callable[[], Any]:
        """The demo's upload of a dataset (this tree's studio.train.actions.upload_dataset)."""
        from studio.demo.caller import Caller
        from studio.demo.policy import DemoPolicy
        from studio.train.actions import upload_dataset

        workspace = scratch / "workspace"
        workspace.mkdir(exist_ok=True)
        policy = DemoPolicy(enabled=True).bound_to(workspace)
        caller = Caller(workspace, policy, policy.new_visitor("127.0.0.1"))

        def upload() -> str:
            copied, error = upload_dataset(caller, path)
            if error:  # the panel's Markdown: its last line is the reason
                raise ValueError(error.strip().splitlines()[-1])
            return str(copied)

        return upload

    fold_bomb = "{% if false %}{{ 'x' * 100000 * 10000 }}{% endif %}" + CHATML
    return [
        (
            "template: a never-run branch folding to 1 GB",
            check_with_template(CHATML + "x"),
            check_with_template(fold_bomb),
        ),
        ("template: 20 such templates, each new", check_with_template(CHATML + "y"), many_templates),
        ("regex reward ((a{100}){100}){100}", regex_reward(r"\d+"), regex_reward("((a{100}){100}){100}")),
        ("parquet: 523 bytes holding 1.5 GB, row check", rows_of(small), rows_of(bomb)),
        ("parquet: the same, uploaded to the demo", demo_upload(small), demo_upload(bomb)),
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        print(f"{'payload':48} {'before':>8} {'peak':>8} {'after':>8} {'after-before':>13}  answer")
        for name, benign, hostile in payloads(Path(scratch)):
            benign()  # imports and caches first
            before, peak, after, answer = measured(hostile)
            print(
                f"{name:48} {before / MB:7.0f}M {peak / MB:7.0f}M {after / MB:7.0f}M {(after - before) / MB:+12.0f}M"
                f"  {answer}"
            )
            time.sleep(0.1)


if __name__ == "__main__":
    main()
