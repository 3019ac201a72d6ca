"""Build the bundled demo assets: a tiny pre-trained LLaMA, its tokenizer and the demo datasets.

Run ``python assets/build_demo.py`` from the repository root (or anywhere: paths are relative to this
file). Everything is synthetic and seeded, so a re-run on the same machine rebuilds the same files.
Nothing is downloaded; the script runs offline on a CPU in a few minutes.

The demo task is reading a date: asked about ``2024-03-15``, answer its month and day in words,
``March 15``. The pre-training corpus uses both date styles (and the prompts' words) in ordinary prose,
sometimes side by side, as real text does; so the base model knows dates the way a pre-trained model
knows facts. It has never seen the chat format or an instruction, so it cannot answer the task's
request: a short LoRA run teaches it to, and because each answer is exact, held-out exact match measures
it. (The year stays out of the answer: copying a token through, which a model of this size does not
learn in a short pre-training, would make the demo measure that instead of the fine-tune.)

``python assets/build_demo.py --datasets-only`` rewrites the datasets without pre-training again.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

# The script's own folder is on sys.path when it runs, so its sibling module imports by name.
from demo_text import (
    PROMPTS,
    YEARS,
    build_corpus,
    distinct_dates,
    iso,
    long_form,
    preference_row,
    sft_row,
    style_row,
)
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

ASSETS = Path(__file__).resolve().parent
MODEL_DIR = ASSETS / "demo-model"
DATA_DIR = ASSETS / "datasets"

SEED = 1234
VOCAB_SIZE = 3072
CORPUS_DOCS = 20_000
SFT_TRAIN_ROWS = 2000
SFT_EVAL_ROWS = 200
PREFERENCE_ROWS = 80
STYLE_TRAIN_ROWS = 160
STYLE_EVAL_ROWS = 40

# Model and pre-training sizes: small enough to pre-train in a couple of minutes on 2 CPU cores and
# to stay far below the 20 MB budget, large enough that LoRA can learn the task quickly.
HIDDEN_SIZE = 256
INTERMEDIATE_SIZE = 688
NUM_LAYERS = 4
NUM_HEADS = 4
BLOCK_SIZE = 128
PRETRAIN_BATCH = 32
PRETRAIN_STEPS = int(os.environ.get("DEMO_PRETRAIN_STEPS", 800))
PRETRAIN_LR = 3e-3

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>"]

# Zephyr-style template: each turn is "<|role|>\n{content}</s>\n". The assistant's content and its
# closing eos are wrapped in generation markers, so the eos is trained (generation then stops on it)
# and return_assistant_tokens_mask=True marks exactly the tokens to learn.
# Tool calling (apply_chat_template(..., tools=tools)): the tools open the text in a system turn (after
# the system message's own text, if any), one JSON schema a line; an assistant's call is
# <tool_call>{"name": ..., "arguments": {...}}</tool_call> inside the generation markers, so it trains
# like an answer; a tool's result is a "<|tool|>" turn. Without tools the text is byte for byte what
# it was before tools were added (the model was pre-trained and tested on that).
CHAT_TEMPLATE = (
    "{% if tools %}"
    "{{ '<|system|>\\n' }}"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\\n\\n' }}{% endif %}"
    "{{ 'You can call these tools. To call one, answer with "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>.\' }}'
    "{% for tool in tools %}"
    "{{ '\\n' + ((tool['function'] if tool['function'] is defined else tool) | tojson) }}"
    "{% endfor %}"
    "{{ eos_token + '\\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{% if not tools %}{{ '<|system|>\\n' + message['content'] + eos_token + '\\n' }}{% endif %}"
    "{% elif message['role'] == 'user' %}"
    "{{ '<|user|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ '<|assistant|>\\n' }}"
    "{% generation %}{{ message['content'] }}"
    "{% for call in message['tool_calls'] or [] %}"
    "{% set function = call['function'] if call['function'] is defined else call %}"
    "{% set arguments = function['arguments'] if function['arguments'] is string "
    "else (function['arguments'] | tojson) %}"
    "{{ ('\\n' if message['content'] or not loop.first else '') + '<tool_call>{\"name\": ' "
    "+ (function['name'] | tojson) + ', \"arguments\": ' + arguments + '}</tool_call>' }}"
    "{% endfor %}"
    "{{ eos_token }}{% endgeneration %}"
    "{{ '\\n' }}"
    "{% elif message['role'] == 'tool' %}"
    "{{ '<|tool|>\\n' + (message['content'] if message['content'] is string else message['content'] | tojson) "
    "+ eos_token + '\\n' }}"
    "{% else %}"
    "{{ raise_exception('Unknown role: ' + message['role']) }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

# ----------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------

# LLaMA-3-style pre-tokenization, except that a run of digits stays whole: numbers never carry the
# space before them, so "2024" and "15" are the same tokens in "2024-03-15" and in "March 15, 2024"
# and the model can copy them rather than learn a second spelling of each.
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def train_tokenizer(corpus: list[str]) -> PreTrainedTokenizerFast:
    """Byte-level BPE over the corpus, wrapped as a transformers tokenizer with a chat template."""
    special = [PAD, BOS, EOS, *ROLE_TOKENS]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=ROLE_TOKENS,
        chat_template=CHAT_TEMPLATE,
        model_max_length=BLOCK_SIZE * 2,
        clean_up_tokenization_spaces=False,
    )


# ----------------------------------------------------------------------------------------------
# Model and pre-training
# ----------------------------------------------------------------------------------------------


def build_model(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    """A freshly initialised tiny LLaMA sized to the tokenizer."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_HEADS,
        max_position_embeddings=BLOCK_SIZE * 2,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config)


def packed_blocks(corpus: list[str], tokenizer: PreTrainedTokenizerFast) -> torch.Tensor:
    """All documents as ``<s> text </s>``, concatenated and cut into BLOCK_SIZE rows."""
    ids: list[int] = []
    for encoded in tokenizer(corpus, add_special_tokens=False)["input_ids"]:
        ids += [tokenizer.bos_token_id, *encoded, tokenizer.eos_token_id]
    rows = len(ids) // BLOCK_SIZE
    return torch.tensor(ids[: rows * BLOCK_SIZE]).view(rows, BLOCK_SIZE)


def batches(blocks: torch.Tensor, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Endless shuffled batches of blocks."""
    while True:
        order = torch.randperm(len(blocks), generator=generator)
        for start in range(0, len(order) - PRETRAIN_BATCH + 1, PRETRAIN_BATCH):
            yield blocks[order[start : start + PRETRAIN_BATCH]]


def cosine_lr(step: int, warmup: int = 30) -> float:
    """Linear warm-up, then cosine decay to 10% of PRETRAIN_LR."""
    if step < warmup:
        return PRETRAIN_LR * (step + 1) / warmup
    progress = (step - warmup) / max(1, PRETRAIN_STEPS - warmup)
    return PRETRAIN_LR * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


PROBE_PROMPT = "The code {iso} stands for"


@torch.inference_mode()
def probe_accuracy(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, days: list[dt.date]) -> float:
    """How often the model completes "The code 2024-03-15 stands for" with " March 15, 2024" (greedy).

    This measures the knowledge pre-training is meant to give (dates in both styles), in prose; the chat
    task itself is never shown to the base model.
    """
    was_training = model.training
    model.eval()
    hits = 0
    for day in days:
        ids = tokenizer(PROBE_PROMPT.format(iso=iso(day)), return_tensors="pt")["input_ids"]
        out = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        hits += tokenizer.decode(out[0, ids.shape[1] :]).startswith(" " + long_form(day))
    model.train(was_training)
    return hits / len(days)


def pretrain(
    model: LlamaForCausalLM, blocks: torch.Tensor, probe: Callable[[LlamaForCausalLM], float] | None = None
) -> list[float]:
    """A short plain language-model pre-training; returns the loss every 50 steps."""
    generator = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=PRETRAIN_LR, weight_decay=0.0)
    model.train()
    losses: list[float] = []
    started = time.perf_counter()
    for step, batch in zip(range(PRETRAIN_STEPS), batches(blocks, generator), strict=False):
        for group in optimizer.param_groups:
            group["lr"] = cosine_lr(step)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 50 == 0 or step == PRETRAIN_STEPS - 1:
            losses.append(round(loss.item(), 3))
            print(
                f"  pretrain step {step:4d}  loss {loss.item():.3f}  {time.perf_counter() - started:.0f}s", flush=True
            )
        if probe and (step % 200 == 0 or step == PRETRAIN_STEPS - 1):
            print(f"  probe at step {step}: {probe(model):.0%}", flush=True)
    model.eval()
    return losses


# ----------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """One JSON object per line, UTF-8."""
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def model_card(model: LlamaForCausalLM, losses: list[float], tokenizer_size: int) -> str:
    """The README.md of the demo model."""
    params = sum(p.numel() for p in model.parameters())
    return f"""# demo-model: a tiny LLaMA for the fine-tuning studio's demo

A {params / 1e6:.1f}M-parameter `LlamaForCausalLM` ({NUM_LAYERS} layers, hidden {HIDDEN_SIZE},
{NUM_HEADS} heads, MLP {INTERMEDIATE_SIZE}, tied embeddings, fp32) with a {tokenizer_size}-token
byte-level BPE tokenizer. It exists so that the studio can show a real fine-tuning run on a CPU in
about a minute. It is not useful for anything else.

## How it was built

`python assets/build_demo.py` (seed {SEED}, offline, a few minutes on 2 CPU cores):

1. generates {CORPUS_DOCS} short synthetic English documents: prose with dates written as `2024-03-15`
   and as `March 15, 2024` (sometimes both for the same day), tables that list ISO dates beside their
   written form, repeated lists, numbers and the words of the demo prompts;
2. trains the tokenizer on them (special tokens `<s>` bos, `</s>` eos, `<pad>` pad, and the role
   markers `<|system|>`, `<|user|>`, `<|assistant|>`);
3. pre-trains the model from scratch for {PRETRAIN_STEPS} steps of {PRETRAIN_BATCH}x{BLOCK_SIZE}
   tokens (AdamW, lr {PRETRAIN_LR}, cosine). Loss every 50 steps: {losses}.

So the base model writes date-filled prose, but it has never seen a request, the chat format or the task.

## Chat format

```
<|user|>
Which month and day is 2024-03-15?</s>
<|assistant|>
March 15</s>
```

The template wraps the assistant's text and its `</s>` in `{{% generation %}}` markers, so
`apply_chat_template(..., return_assistant_tokens_mask=True)` gives the tokens to train on.
Generation stops at `</s>`.

### Tool calling

With `apply_chat_template(messages, tools=tools)` the tools open the text in a system turn (after the
system message's text, if there is one), one JSON schema a line. An assistant's call
(`{{"role": "assistant", "content": "", "tool_calls": [{{"type": "function", "function": {{"name": ...,
"arguments": {{...}}}}}}]}}`) is written as `<tool_call>{{...}}</tool_call>` inside the generation markers, so
it is trained like an answer; a tool's result (`{{"role": "tool", "content": ...}}`) is a `<|tool|>` turn:

```
<|system|>
You can call these tools. To call one, answer with <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>.
{{"name": "get_weather", "description": "The weather in a city.", "parameters": {{...}}}}</s>
<|user|>
Is it raining in Paris?</s>
<|assistant|>
<tool_call>{{"name": "get_weather", "arguments": {{"city": "Paris"}}}}</tool_call></s>
<|tool|>
{{"rain": true}}</s>
<|assistant|>
Yes, it is raining in Paris.</s>
```

Without tools the text is exactly as above: the tool parts were added to the template after
pre-training, and the model has never seen them (`<|tool|>` and `<tool_call>` are plain text to its
tokenizer). Only the template changed; the weights and the tokenizer did not.

## The demo task

`assets/datasets/demo_sft_train.jsonl` teaches reading an ISO date as month and day in words; the
held-out `demo_sft_eval.jsonl` measures it by exact match. The base model scores 0%; the demo preset's
LoRA run (600 steps, under 90 s on 2 CPU cores) scores 89-100% (`python benchmarks/demo_accuracy.py`).
"""


DATASETS_README = f"""# Demo datasets

Synthetic, generated by `assets/build_demo.py` (seed {SEED}). The task: read an ISO date and answer
its month and day in words, e.g. `2024-03-15` gives `March 15` (month name, day without a leading
zero). The user's request comes in one of {len(PROMPTS)} phrasings. Each answer has exactly one
correct form, so exact match is a meaningful score. Years run from {YEARS.start} to {YEARS.stop - 1}.

- `demo_sft_train.jsonl` ({SFT_TRAIN_ROWS} rows): conversational SFT rows,
  `{{"messages": [{{"role": "user", "content": ...}}, {{"role": "assistant", "content": ...}}]}}`.
- `demo_sft_eval.jsonl` ({SFT_EVAL_ROWS} rows): the same format, held out: none of its dates is in the
  training file. Score it by exact match of the generated answer.
- `demo_preference.jsonl` ({PREFERENCE_ROWS} rows): conversational preference rows in TRL's
  explicit-prompt form, `{{"prompt": [user message], "chosen": [assistant message], "rejected":
  [assistant message]}}`. Chosen is the correct answer; rejected is a plausible mistake (wrong month,
  day off by one, leading zero kept, day and month swapped, the wrong layout, or the year added). None
  of its dates is in the eval file.
- `demo_dpo_train.jsonl` ({STYLE_TRAIN_ROWS} rows) and `demo_dpo_eval.jsonl` ({STYLE_EVAL_ROWS} rows, held out): the
  DPO demo's style pairs, in the same form. Both answers are correct; chosen writes the day as an ordinal
  (`March 15th`), rejected as the SFT set does (`March 15`). A model tuned on the SFT set prefers the
  rejected style; DPO teaches it the other one (`assets/presets/demo-dpo.yaml`). Their dates are in no
  other file.

The demo model (`assets/demo-model/`) was pre-trained on prose and tables that use both date styles,
but never on a request or the chat format, so it scores about 0% on the eval file before fine-tuning.
"""


def write_datasets(rng: random.Random) -> None:
    """The SFT train/eval split (disjoint dates) and the preference set."""
    eval_dates = distinct_dates(rng, SFT_EVAL_ROWS, exclude=set())
    train_dates = distinct_dates(rng, SFT_TRAIN_ROWS, exclude=set(eval_dates))
    preference_dates = distinct_dates(rng, PREFERENCE_ROWS, exclude=set(eval_dates))
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    write_jsonl(DATA_DIR / "demo_sft_train.jsonl", [sft_row(d, rng) for d in train_dates])
    write_jsonl(DATA_DIR / "demo_sft_eval.jsonl", [sft_row(d, rng) for d in eval_dates])
    write_jsonl(DATA_DIR / "demo_preference.jsonl", [preference_row(d, rng) for d in preference_dates])
    # The DPO demo's style pairs draw from a generator of their own, so the files above stay as they were.
    style_rng = random.Random(SEED + 3)
    taken = set(eval_dates) | set(train_dates) | set(preference_dates)
    style_dates = distinct_dates(style_rng, STYLE_TRAIN_ROWS + STYLE_EVAL_ROWS, exclude=taken)
    style_rows = [style_row(d, style_rng) for d in style_dates]
    write_jsonl(DATA_DIR / "demo_dpo_train.jsonl", style_rows[:STYLE_TRAIN_ROWS])
    write_jsonl(DATA_DIR / "demo_dpo_eval.jsonl", style_rows[STYLE_TRAIN_ROWS:])
    (DATA_DIR / "README.md").write_text(DATASETS_README, encoding="utf-8")


def save_model(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, card: str) -> None:
    """Replace assets/demo-model/ with the model (safetensors, fp32), tokenizer and card."""
    if MODEL_DIR.exists():
        shutil.rmtree(MODEL_DIR)
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(MODEL_DIR)
    tokenizer.save_pretrained(MODEL_DIR)
    (MODEL_DIR / "README.md").write_text(card, encoding="utf-8")


def main() -> None:
    """Rebuild every demo asset (only the datasets with ``--datasets-only``)."""
    started = time.perf_counter()
    random.seed(SEED)
    torch.manual_seed(SEED)
    write_datasets(random.Random(SEED))
    if "--datasets-only" in sys.argv[1:]:
        print(f"datasets written to {DATA_DIR}")
        return
    corpus = build_corpus(random.Random(SEED + 1), CORPUS_DOCS)
    tokenizer = train_tokenizer(corpus)
    print(f"tokenizer: {len(tokenizer)} tokens ({time.perf_counter() - started:.0f}s)")
    model = build_model(tokenizer)
    blocks = packed_blocks(corpus, tokenizer)
    print(f"corpus: {blocks.numel()} tokens in {len(blocks)} blocks")
    probe_days = distinct_dates(random.Random(SEED + 2), 50, exclude=set())
    losses = pretrain(model, blocks, lambda m: probe_accuracy(m, tokenizer, probe_days))
    save_model(model, tokenizer, model_card(model, losses, len(tokenizer)))
    size = sum(f.stat().st_size for f in MODEL_DIR.iterdir()) / 1e6
    print(f"saved {MODEL_DIR} ({size:.1f} MB) in {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
