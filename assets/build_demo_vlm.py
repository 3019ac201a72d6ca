"""Build the bundled vision-language demo: a tiny LLaVA and its synthetic image dataset of coloured shapes.

Run ``python assets/build_demo_vlm.py`` from anywhere (paths are relative to this file), after
``assets/build_demo.py``: the language model of the demo VLM is the text demo's pre-trained model. Everything
is synthetic and seeded, so a re-run on the same machine rebuilds the same files. Nothing is downloaded; the
script runs offline on a CPU in three to four minutes on 2 cores.

The model, ``assets/demo-vlm/``, is a real ``LlavaForConditionalGeneration`` with its ``LlavaProcessor``, put
together the way LLaVA is:

- the language model is the text demo's LLaMA (``assets/demo-model/``) and its tokenizer, with one special
  token added, ``<image>``;
- the vision tower is a tiny CLIP vision transformer: a 64x64 image in 16x16 patches gives 17 image tokens
  (CLS and 16 patches). It is pre-trained here first, on its own (``pretrain_vision_tower``), to say what each
  patch shows and how many shapes of each kind and colour the picture holds, as a real VLM starts from a
  pre-trained image encoder;
- the projector is LLaVA's two-layer MLP. The whole model is then pre-trained on captions
  (``pretrain_on_captions``, LLaVA's first stage): an image followed by a plain description ("A red circle.",
  "3 squares and 1 circle."). The language model learns there to read image tokens and to write the words of
  pictures; its tokenizer, trained on dates, spells "triangle" or "purple" in pieces it never saw together.

So, like the text demo model, the base model knows its subject but has never seen the chat format, a
question or a request: asked "What colour is the shape?" in the chat format it describes the picture
("green square.") and scores 0% by exact match. A short fine-tune teaches it to answer.

The task, ``assets/datasets/demo_vlm_{train,eval}.jsonl`` with the PNG images in
``assets/datasets/demo_vlm_images/``: small pictures of coloured shapes and three kinds of question whose
answers are a single exact word or number ("What colour is the shape?" ``red``, "What shape is this?"
``triangle``, "How many squares are there?" ``3``), so held-out exact match measures what was learnt. The eval
file's images are all different from the training file's, and the pre-training pictures are drawn apart from
both.

``python assets/build_demo_vlm.py --datasets-only`` rewrites the images and the datasets without rebuilding
the model. Either run also (re)writes the vision-language section of ``assets/datasets/README.md``; run it
after ``assets/build_demo.py``, which rewrites that file without the section.

This script puts the processor and the model together, saves them and runs the whole build. The pictures, the
questions and the dataset files are ``demo_shapes.py``'s; the two pre-training stages are
``demo_vlm_pretraining.py``'s; the chat template is derived here from the text demo's (``build_demo.py``).
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

# The script's own folder is on sys.path when it runs, so its sibling modules import by name.
from build_demo import CHAT_TEMPLATE as TEXT_CHAT_TEMPLATE
from demo_shapes import ASSETS, DEMO_RESULT, IMAGE_DIR, IMAGE_SIZE, IMAGE_TOKEN, SEED, write_datasets
from demo_vlm_pretraining import (
    CAPTION_PROJECTOR_LR,
    IMAGE_TOKENS_PER_IMAGE,
    PATCH_SIZE,
    PATCHES,
    VISION_HIDDEN_SIZE,
    pretrain_on_captions,
    pretrain_vision_tower,
)
from transformers import (
    AutoTokenizer,
    CLIPImageProcessorPil,
    CLIPVisionConfig,
    LlamaForCausalLM,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
)

TEXT_MODEL_DIR = ASSETS / "demo-model"
MODEL_DIR = ASSETS / "demo-vlm"

# The rest of the vision tower's size (its patches and width are demo_vlm_pretraining.py's: it pre-trains them).
VISION_INTERMEDIATE_SIZE = 128
VISION_LAYERS = 2
VISION_HEADS = 2

# The text demo's chat format, with content parts: build_demo.py's CHAT_TEMPLATE with each message's content
# written by a render macro. A content is a string or a list of parts, {"type": "text", "text": ...} written as
# its text and {"type": "image"} written as "<image>" where it stands (the processor expands it into the image's
# IMAGE_TOKENS_PER_IMAGE tokens). The assistant's content and its closing eos stay inside the text template's
# generation markers, so return_assistant_tokens_mask=True (TRL's assistant_only_loss) trains the answer and the
# stop. With string contents the text is byte for byte the text demo's, tools included.
RENDER_MACRO = (
    "{%- macro render(content) -%}"
    "{%- if content is string -%}{{ content }}"
    "{%- elif content is mapping -%}{{ content | tojson }}"
    "{%- elif content -%}"
    "{%- for part in content -%}"
    "{%- if part is string -%}{{ part }}"
    "{%- elif part['type'] == 'image' -%}{{ '" + IMAGE_TOKEN + "' }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}"
    "{%- else -%}{{ part | tojson }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
)

# Where the text template reads a system, user or assistant message's content: (what it writes there, what the VLM
# template writes instead, how many times the text template has it).
CONTENT_EXPRESSIONS = [
    # The system message's text, before the tools.
    ("{{ messages[0]['content'] + '\\n\\n' }}", "{{ render(messages[0]['content']) + '\\n\\n' }}", 1),
    # A system or a user turn.
    ("+ message['content'] + eos_token", "+ render(message['content']) + eos_token", 2),
    # The assistant's answer, inside the generation markers.
    ("{% generation %}{{ message['content'] }}", "{% generation %}{{ render(message['content']) }}", 1),
]
# Where the VLM template reads a content as the text template does: (what it writes, how many times). Whether an
# assistant's tool calls follow some content (a list of parts is content when it is not empty), and a tool's
# result (a string as it is, anything else as JSON).
KEPT_CONTENT_EXPRESSIONS = [
    ("('\\n' if message['content'] or not loop.first else '')", 1),
    ("(message['content'] if message['content'] is string else message['content'] | tojson)", 1),
]


def with_content_parts(text_template: str) -> str:
    """The text template with each system, user and assistant message's content written by RENDER_MACRO.

    Each expression must be found exactly as often as the lists above say, and no other place may read a content,
    so a change to build_demo.py's template stops the build here instead of slipping through."""
    template, unread = text_template, text_template
    kept = [(expression, expression, times) for expression, times in KEPT_CONTENT_EXPRESSIONS]
    for old, new, times in [*CONTENT_EXPRESSIONS, *kept]:
        found = text_template.count(old)
        if found != times:
            raise ValueError(f"build_demo.py's chat template has {old!r} {found} times, not {times}")
        template = template.replace(old, new)
        unread = unread.replace(old, "")
    if "['content']" in unread:
        raise ValueError("build_demo.py's chat template reads a message's content in a place this script does not know")
    return RENDER_MACRO + template


CHAT_TEMPLATE = with_content_parts(TEXT_CHAT_TEMPLATE)


# ----------------------------------------------------------------------------------------------
# Model and processor
# ----------------------------------------------------------------------------------------------


def build_processor() -> LlavaProcessor:
    """The text demo's tokenizer with ``<image>`` added, a CLIP image processor at IMAGE_SIZE, and the chat
    template with content parts."""
    tokenizer = AutoTokenizer.from_pretrained(TEXT_MODEL_DIR)
    for loading_detail in ("is_local", "local_files_only"):  # how it was loaded here, not what it is
        tokenizer.init_kwargs.pop(loading_detail, None)
    tokenizer.add_tokens([IMAGE_TOKEN], special_tokens=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    # The PIL backend: the default one needs torchvision, which the studio does not install.
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE},
        crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
    )
    return LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="full",
        num_additional_image_tokens=1,  # CLIP's CLS token, which the "full" strategy keeps
        chat_template=CHAT_TEMPLATE,
        image_token=IMAGE_TOKEN,
    )


def build_model(processor: LlavaProcessor) -> LlavaForConditionalGeneration:
    """A LLaVA whose language model is the text demo's LLaMA (one more embedding row, for ``<image>``) and whose
    vision tower and projector are freshly initialised."""
    tokenizer = processor.tokenizer
    language_model = LlamaForCausalLM.from_pretrained(TEXT_MODEL_DIR, dtype=torch.float32)
    language_model.resize_token_embeddings(len(tokenizer))
    language_model.config._name_or_path = ""  # not this machine's path in the saved config
    vision_config = CLIPVisionConfig(
        hidden_size=VISION_HIDDEN_SIZE,
        intermediate_size=VISION_INTERMEDIATE_SIZE,
        num_hidden_layers=VISION_LAYERS,
        num_attention_heads=VISION_HEADS,
        image_size=IMAGE_SIZE,
        patch_size=PATCH_SIZE,
        projection_dim=VISION_HIDDEN_SIZE,
    )
    config = LlavaConfig(
        vision_config=vision_config,
        text_config=language_model.config,
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        image_seq_length=IMAGE_TOKENS_PER_IMAGE,
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,  # the tower is only two layers deep: take its last
        tie_word_embeddings=True,
    )
    model = LlavaForConditionalGeneration(config)
    model.model.language_model.load_state_dict(language_model.model.state_dict())
    model.tie_weights()
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(model.generation_config, name, getattr(tokenizer, name))
    model.eval()
    return model


def parameter_counts(model: LlavaForConditionalGeneration) -> dict[str, int]:
    """Parameters of the vision tower, the projector and the language model (tied embeddings counted once)."""
    return {
        "vision tower": sum(p.numel() for p in model.model.vision_tower.parameters()),
        "projector": sum(p.numel() for p in model.model.multi_modal_projector.parameters()),
        "language model": sum(p.numel() for p in model.model.language_model.parameters()),
    }


def model_card(model: LlavaForConditionalGeneration, vocab_size: int, pretraining: dict[str, str]) -> str:
    """The README.md of the demo VLM."""
    counts = parameter_counts(model)
    total = sum(counts.values())
    text = model.config.text_config
    rows = [
        (
            f"vision tower: CLIP vision transformer, {VISION_LAYERS} layers, hidden {VISION_HIDDEN_SIZE}, "
            f"{VISION_HEADS} heads, MLP {VISION_INTERMEDIATE_SIZE}, {IMAGE_SIZE}x{IMAGE_SIZE} images in "
            f"{PATCH_SIZE}x{PATCH_SIZE} patches",
            "`model.vision_tower`",
            counts["vision tower"],
        ),
        (
            f"projector: LLaVA's MLP, {VISION_HIDDEN_SIZE} -> {text.hidden_size} -> GELU -> {text.hidden_size}",
            "`model.multi_modal_projector`",
            counts["projector"],
        ),
        (
            f"language model: the text demo's LLaMA, {text.num_hidden_layers} layers, hidden {text.hidden_size}, "
            "tied embeddings",
            "`model.language_model` (+ `lm_head`, tied)",
            counts["language model"],
        ),
    ]
    table = "\n".join(f"| {part} | {module} | {number:,} |" for part, module, number in rows)
    return f"""# demo-vlm: a tiny LLaVA for the fine-tuning studio's vision-language demo

A {total / 1e6:.2f}M-parameter `LlavaForConditionalGeneration` (fp32) with its `LlavaProcessor`. It exists so
that the studio can show a real vision-language fine-tuning run on a CPU in about a minute. It is not useful
for anything else.

| part | module | parameters |
|---|---|---|
{table}

Each image becomes {IMAGE_TOKENS_PER_IMAGE} tokens: the processor resizes and centre-crops it to
{IMAGE_SIZE}x{IMAGE_SIZE} (CLIP's normalisation) and expands each `{IMAGE_TOKEN}` in the text into
{IMAGE_TOKENS_PER_IMAGE} `{IMAGE_TOKEN}` tokens; the model puts there the projected features of the vision
tower's last layer, CLS token and {PATCHES} patches (`vision_feature_select_strategy="full"`,
`vision_feature_layer=-1`).

## How it was built

`python assets/build_demo_vlm.py` (seed {SEED}, offline, three to four minutes on 2 CPU cores), from the text demo
model (`assets/demo-model/`, built by `assets/build_demo.py`):

1. the language model starts as the text demo's pre-trained LLaMA, and the tokenizer is its tokenizer, with the
   special token `{IMAGE_TOKEN}` added (id {model.config.image_token_id}, vocabulary {vocab_size}; its new
   embedding row starts at the mean of the others);
2. the vision tower is pre-trained on its own, on synthetic pictures like the demo's (one large shape, or up
   to eight small ones on a 4x4 grid) but none of them in the datasets: linear heads on its last layer learn,
   for each patch, the kind and colour of the shape that covers it, and, from every token, how many shapes of
   each kind and of each colour the picture holds. The heads are then thrown away. {pretraining["vision"]};
3. the whole model is pre-trained on captions, as in LLaVA's first stage: `<s>`, the image, a plain
   description ("A red circle.", "2 squares and 3 other shapes.", "A blue square, a red circle and a green
   triangle.") and `</s>`, loss on the description, vision tower frozen, projector and language model trained
   (projector at lr {CAPTION_PROJECTOR_LR}). {pretraining["captions"]}.

So the base model describes pictures, but it has never seen the chat format, a question or a request.

## Chat format

The text demo's, with content parts: a message's `content` is a string or a list of parts, where
`{{"type": "text", "text": ...}}` is written as its text and `{{"type": "image"}}` as `{IMAGE_TOKEN}`, where
the part stands:

```
<|user|>
{IMAGE_TOKEN}What colour is the shape?</s>
<|assistant|>
red</s>
```

The template wraps the assistant's text and its `</s>` in `{{% generation %}}` markers, so
`processor.apply_chat_template(..., return_assistant_tokens_mask=True)` (TRL's `assistant_only_loss=True`)
marks the answer and its stop token. `add_generation_prompt=True` ends the text with `<|assistant|>\\n`;
generation stops at `</s>`. With string contents the text is exactly the text demo's (tools included). Pad
is `<pad>` (id {model.config.text_config.pad_token_id}); nothing is added at the start (no `<s>`).

## The demo task

`assets/datasets/demo_vlm_train.jsonl` asks the colour of a shape, which shape it is, or how many squares a
picture holds; the held-out `demo_vlm_eval.jsonl` measures it by exact match. The base model scores 0%.
{DEMO_RESULT}
"""


def save_model(model: LlavaForConditionalGeneration, processor: LlavaProcessor, pretraining: dict[str, str]) -> None:
    """Replace assets/demo-vlm/ with the model (safetensors, fp32), the processor and the card."""
    if MODEL_DIR.exists():
        shutil.rmtree(MODEL_DIR)
    model.save_pretrained(MODEL_DIR)
    processor.save_pretrained(MODEL_DIR)
    (MODEL_DIR / "README.md").write_text(model_card(model, len(processor.tokenizer), pretraining), encoding="utf-8")


def main() -> None:
    """Rebuild the VLM demo's datasets and (unless ``--datasets-only``) its model."""
    started = time.perf_counter()
    random.seed(SEED)
    torch.manual_seed(SEED)
    images, size = write_datasets(random.Random(SEED))
    print(f"datasets: {images} images ({size / 1e3:.0f} kB) in {IMAGE_DIR} ({time.perf_counter() - started:.1f}s)")
    if "--datasets-only" in sys.argv[1:]:
        return
    processor = build_processor()
    model = build_model(processor)
    stage_times = [time.perf_counter()]
    vision = pretrain_vision_tower(model, processor, random.Random(SEED + 1))
    stage_times.append(time.perf_counter())
    captions = pretrain_on_captions(model, processor, random.Random(SEED + 2))
    stage_times.append(time.perf_counter())
    vision_seconds, caption_seconds = stage_times[1] - stage_times[0], stage_times[2] - stage_times[1]
    print(f"pre-training: vision tower {vision_seconds:.0f}s, captions {caption_seconds:.0f}s")
    save_model(model, processor, {"vision": vision, "captions": captions})
    size = sum(f.stat().st_size for f in MODEL_DIR.iterdir()) / 1e6
    print(f"parameters: {parameter_counts(model)}")
    print(f"saved {MODEL_DIR} ({size:.1f} MB) in {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
