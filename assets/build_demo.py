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
YEARS = range(1970, 2040)
REPEAT_SHARE = 0.2
TABLE_SHARE = 0.4

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
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{{ '<|system|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% elif message['role'] == 'user' %}"
    "{{ '<|user|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ '<|assistant|>\\n' }}"
    "{% generation %}{{ message['content'] + eos_token }}{% endgeneration %}"
    "{{ '\\n' }}"
    "{% else %}"
    "{{ raise_exception('Unknown role: ' + message['role']) }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# Three phrasings of the instruction: the tuned model must follow any of them.
PROMPTS = [
    "Write the month and day of {iso} in words",
    "Which month and day is {iso}?",
    "Read this date as month and day: {iso}",
]


# ----------------------------------------------------------------------------------------------
# Dates and the task
# ----------------------------------------------------------------------------------------------


def random_date(rng: random.Random) -> dt.date:
    """A uniformly random valid date in YEARS."""
    start = dt.date(YEARS.start, 1, 1).toordinal()
    end = dt.date(YEARS.stop - 1, 12, 31).toordinal()
    return dt.date.fromordinal(rng.randint(start, end))


def iso(day: dt.date) -> str:
    """``2024-03-15``."""
    return day.isoformat()


def long_form(day: dt.date) -> str:
    """``March 15, 2024``: how prose in the pre-training corpus writes a date."""
    return f"{MONTHS[day.month - 1]} {day.day}, {day.year}"


def month_and_day(day: dt.date) -> str:
    """``March 15``: the task's one correct answer."""
    return f"{MONTHS[day.month - 1]} {day.day}"


def wrong_month_and_day(day: dt.date, rng: random.Random) -> str:
    """A plausible but wrong answer, for the rejected side of the preference set."""
    month = MONTHS[day.month - 1]
    mistakes: list[Callable[[], str]] = [
        lambda: f"{MONTHS[(day.month - 1 + rng.choice([-1, 1])) % 12]} {day.day}",
        lambda: f"{month} {day.day + rng.choice([-1, 1]) or 2}",
        lambda: f"{day.day} {month}",
        lambda: f"{month} {day.day}, {day.year}",
    ]
    if day.day <= 12 and day.day != day.month:
        # The classic day/month confusion, only where it gives a valid-looking date.
        mistakes.append(lambda: f"{MONTHS[day.day - 1]} {day.month}")
    if day.day < 10:  # a leading zero kept is a mistake only where there is one
        mistakes.append(lambda: f"{month} {day.day:02d}")
    return rng.choice(mistakes)()


def distinct_dates(rng: random.Random, count: int, exclude: set[dt.date]) -> list[dt.date]:
    """``count`` different random dates, none of them in ``exclude``."""
    chosen: list[dt.date] = []
    seen = set(exclude)
    while len(chosen) < count:
        day = random_date(rng)
        if day not in seen:
            seen.add(day)
            chosen.append(day)
    return chosen


def sft_row(day: dt.date, rng: random.Random) -> dict:
    """One conversational training example."""
    prompt = rng.choice(PROMPTS).format(iso=iso(day))
    return {
        "messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": month_and_day(day)},
        ]
    }


def preference_row(day: dt.date, rng: random.Random) -> dict:
    """One conversational preference example (TRL's explicit-prompt format)."""
    prompt = rng.choice(PROMPTS).format(iso=iso(day))
    return {
        "prompt": [{"role": "user", "content": prompt}],
        "chosen": [{"role": "assistant", "content": month_and_day(day)}],
        "rejected": [{"role": "assistant", "content": wrong_month_and_day(day, rng)}],
    }


# ----------------------------------------------------------------------------------------------
# Pre-training corpus: coherent prose that uses both date styles, numbers and the prompts' words
# ----------------------------------------------------------------------------------------------


def words(text: str) -> list[str]:
    """Split a space-separated word list (keeps the lists below short)."""
    return text.split()


NAMES = words(
    "Anna Ben Clara David Elena Farid Grace Hugo Ines Jonas Kofi Lena Marco Nora Oscar Priya "
    "Quentin Rosa Samir Tara Umar Vera Wen Yusuf Zoe Amir Bea Carlos Dina Emil Fatima Georg Hana"
)
PLACES = words(
    "library office station harbour museum school market hospital garden bakery theatre airport "
    "river castle village factory stadium bridge park hotel farm island valley church bank"
)
EVENTS = words(
    "meeting concert festival lecture match wedding trial launch party exam race parade auction "
    "dinner holiday journey election harvest opening exhibition conference workshop ceremony"
)
THINGS = words(
    "report letter invoice ticket form record note file entry contract receipt diary message "
    "poster book map photo budget schedule list calendar journal license passport summary order"
)
VERBS = words(
    "signed opened closed checked printed sent saved found read copied filed lost stamped moved "
    "shared updated archived posted approved rejected delivered cleaned painted repaired packed"
)
ADJECTIVES = words(
    "short long old new small large quiet busy cold warm bright dark happy strange simple careful "
    "early late rainy sunny calm windy famous local final formal green golden heavy light slow"
)

# Each document has a small cast that its sentences keep referring to, as real text does. The
# repeats teach the model to look back and copy (dates, years, names), which is the machinery a
# short LoRA run needs. Some sentences give a date in both styles, as real text sometimes does: that
# is knowledge a pre-trained model would have; answering a chat request with it is what the demo teaches.
WRITTEN_DATE_SENTENCES = [
    "The {event} was held on {written} at the {place}.",
    "{written} was a {weekday}.",
    "{name} was born on {written}.",
    "On {written}, {name} went to the {place}.",
    "The {event} is planned for {written}.",
    "{name} remembers {written} well.",
    "{written}: {name} met {other} at the {place}.",
    "In {month} {year}, the {event} moved to the {place}.",
    "{month} is a {adj} month at the {place}.",
    "{name} and {other} left the {place} in {year}.",
]
ISO_DATE_SENTENCES = [
    "Log {iso}: the {thing} was {verb}.",
    "The {thing} dated {iso} was {verb} by {name}.",
    "{iso} {hour}:{minute} {name} {verb} the {thing}.",
    "File {thing}_{iso}.txt was {verb} at {hour}:{minute}.",
    "Entry {count} has the code {iso}.",
    "{iso} is the code on the {thing}.",
]
# Reading an ISO date's year, month number and day is general knowledge of the notation, not the demo
# task (which also needs the month's name and the written layout); the base learns it here.
ISO_PART_SENTENCES = [
    "The {thing} dated {iso} is from {iso_year}.",
    "Log {iso}: day {iso_day} of {iso_year} was {adj}.",
    "{name} {verb} the {thing} on day {iso_day}, as the code {iso} shows.",
    "The year in {iso} is {iso_year}.",
    "The code {iso} means day {iso_day} in the year {iso_year}.",
    "Log {iso} ({iso_year}, day {iso_day}): the {thing} was {verb}.",
    "In {iso}, the month is {iso_month} and the day is {iso_day}.",
    "The code {iso} is day {iso_day} of month {iso_month} in {iso_year}.",
    "Log {iso}: month {iso_month}, {thing} {verb}.",
]
PAIRED_DATE_SENTENCES = [
    "Log {iso}, that is {iso_written}: the {thing} was {verb}.",
    "The code {iso} stands for {iso_written}.",
    "{name} {verb} the {thing} on {iso_written} (code {iso}).",
    "The {thing} dated {iso} was {verb} on {iso_written}.",
    "{iso_written} is written {iso} on the {thing}.",
]
NUMBER_SENTENCES = [
    "There were {count} {thing}s at the {place}.",
    "In {year}, {name} {verb} {count} {thing}s.",
    "{year} was a {adj} year for {name}.",
    "{name} counted {count}, then {more}.",
    "Day {day} of the {event} was {adj}.",
    "The {thing} has {count} pages.",
]
# Sentences that use the words of the prompts without ever showing the task.
PLAIN_SENTENCES = [
    "Please rewrite the {thing} in plain words.",
    "Rewrite this {thing} in a {adj} style.",
    "Convert the {thing} to a {adj} form before you send it.",
    "What is the {thing} about?",
    "The {thing} was written out in full by {name}.",
    "{name} wrote the {thing} in long form.",
    "Each date in the {thing} is written in a different style.",
    "A written date is easier to read than a code.",
    "The form asks for the date in full.",
    "Write out the {thing} in full.",
    "Which date is written on the {thing}?",
    "{name} said: convert to a written date, please.",
]
SENTENCE_KINDS = [
    WRITTEN_DATE_SENTENCES,
    ISO_DATE_SENTENCES,
    ISO_PART_SENTENCES,
    PAIRED_DATE_SENTENCES,
    NUMBER_SENTENCES,
    PLAIN_SENTENCES,
]
SENTENCE_WEIGHTS = [2, 1, 2, 4, 1, 1]


def document_cast(rng: random.Random) -> dict[str, str]:
    """The entities one document keeps mentioning."""
    written_day = random_date(rng)
    iso_day = random_date(rng)
    while iso_day == written_day:
        iso_day = random_date(rng)
    name, other = rng.sample(NAMES, 2)
    count = rng.randint(1, 99)
    return {
        "name": name,
        "other": other,
        "written": long_form(written_day),
        "weekday": WEEKDAYS[written_day.weekday()],
        "month": MONTHS[written_day.month - 1],
        "year": str(written_day.year),
        "iso": iso(iso_day),
        "iso_year": str(iso_day.year),
        "iso_day": str(iso_day.day),
        "iso_month": str(iso_day.month),
        "iso_written": long_form(iso_day),
        "day": str(rng.randint(1, 31)),
        "count": str(count),
        "more": str(count + rng.randint(1, 9)),
        "thing": rng.choice(THINGS),
        "place": rng.choice(PLACES),
        "event": rng.choice(EVENTS),
    }


def sentence(rng: random.Random, cast: dict[str, str]) -> str:
    """One sentence about the cast; verbs, adjectives and times vary per sentence."""
    template = rng.choice(rng.choices(SENTENCE_KINDS, SENTENCE_WEIGHTS)[0])
    fields = {
        **cast,
        "verb": rng.choice(VERBS),
        "adj": rng.choice(ADJECTIVES),
        "hour": f"{rng.randint(0, 23):02d}",
        "minute": f"{rng.randint(0, 59):02d}",
    }
    return template.format(**fields)


def list_items(rng: random.Random) -> list[str]:
    """A few items of one kind: ISO dates, written dates, years, numbers, names or words."""
    kind = rng.randrange(6)
    count = rng.randint(3, 6)
    if kind == 0:
        return [iso(random_date(rng)) for _ in range(count)]
    if kind == 1:
        return [long_form(random_date(rng)) for _ in range(count)]
    if kind == 2:
        return [str(rng.choice(YEARS)) for _ in range(count)]
    if kind == 3:
        return [str(rng.randint(1, 99)) for _ in range(count)]
    words = NAMES if kind == 4 else THINGS + PLACES + EVENTS + MONTHS
    return rng.sample(words, count)


def repeat_document(rng: random.Random) -> str:
    """A list and the same list again. Real text repeats itself; here it does so often enough that
    the model learns to look back and copy within a short pre-training."""
    items = "; ".join(list_items(rng))
    label = rng.choice(["List", "Notes", "Codes", "Items", "Entries", "Dates"])
    again = rng.choice(["Again", "Once more", "Copy", "Repeat"])
    return f"{label}: {items}.\n{again}: {items}."


TABLE_TITLES = ["Calendar", "Date codes", "Log index", "Schedule", "Archive dates", "Key dates"]
TABLE_ROWS = [
    "{iso} | {written}",
    "{iso} = {written}",
    "{iso}: {written}",
    "{iso} ({written})",
]


def table_document(rng: random.Random) -> str:
    """A small table of dates in both styles, as calendars, ledgers and indexes print them."""
    layout = rng.choice(TABLE_ROWS)
    days = [random_date(rng) for _ in range(rng.randint(4, 8))]
    rows = [layout.format(iso=iso(day), written=long_form(day)) for day in days]
    return rng.choice(TABLE_TITLES) + ":\n" + "\n".join(rows)


def corpus_document(rng: random.Random) -> str:
    """A short document: a table of dates, a repeated list, or a few lines of sentences about one cast."""
    draw = rng.random()
    if draw < TABLE_SHARE:
        return table_document(rng)
    if draw < TABLE_SHARE + REPEAT_SHARE:
        return repeat_document(rng)
    cast = document_cast(rng)
    lines = []
    for _ in range(rng.randint(2, 5)):
        lines.append(" ".join(sentence(rng, cast) for _ in range(rng.randint(1, 3))))
    return "\n".join(lines)


def build_corpus(rng: random.Random, docs: int) -> list[str]:
    """The pre-training corpus, one string per document."""
    return [corpus_document(rng) for _ in range(docs)]


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
