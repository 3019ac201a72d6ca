#!/usr/bin/env bash
# The GPU check, run on a lent GPU machine (benchmarks/README.md, "GPU figures"): throughput_real.py's arms, then
# memory_estimate.py's configs (with and without Liger; its QLoRA rows are the 4-bit and 8-bit runs through
# `python -m engine train`), in order of value; a failing step does not stop the next. Everything is printed and
# the script's caller tees it (the command in benchmarks/README.md); each step's own output also goes to $OUT.
#
# Packages the machine lacks come as wheels in $GPU_WHEELS (default .whl/) and the two datasets in
# $TUNING_STUDIO_BENCH_DATASETS (default .gpu/), both git-ignored and carried to the machine; benchmarks/README.md
# says how they are made, and how to run a clean snapshot of HEAD when the checkout holds other work in progress.
# The step sizes can be changed from the environment: GPU_BATCH, GPU_STEPS, GPU_ROWS, GPU_ROUNDS, GPU_ARMS
# (throughput_real.py), GPU_MEMORY_ARGS (memory_estimate.py), and each step's time limit in seconds,
# GPU_T_THROUGHPUT and GPU_T_MEMORY, which with the set-up (30-40 s) fit a 420 s device call. GPU_NO_WHEELS=1
# skips the install (a machine that has the packages; a dry run on a CPU), GPU_CHECKS=0 the bitsandbytes check and
# Liger's warm-up, GPU_MEMORY_ARGS=skip the memory step. GPU_PROFILE=ARM first profiles GPU_PROFILE_STEPS steps of
# that engine arm (benchmarks/profile_engine_step.py, at most GPU_T_PROFILE s).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-figures}
mkdir -p "$OUT"
BATCH=${GPU_BATCH:-16}
STEPS=${GPU_STEPS:-40}
ROWS=${GPU_ROWS:-1000}
ROUNDS=${GPU_ROUNDS:-2}
ARMS=${GPU_ARMS:-engine bare trl-defaults engine-no-liger engine-padded}
MEMORY_ARGS=${GPU_MEMORY_ARGS:---jobs 12 --liger auto off}
T_THROUGHPUT=${GPU_T_THROUGHPUT:-270}
T_MEMORY=${GPU_T_MEMORY:-90}
started=$SECONDS
say() { echo "== $* (at $((SECONDS - started)) s)"; }

if [ -z "${GPU_NO_WHEELS:-}" ]; then
    say "installing the carried wheels into /tmp/site"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "${GPU_WHEELS:-.whl}"/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export TUNING_STUDIO_BENCH_DATASETS=${TUNING_STUDIO_BENCH_DATASETS:-$PWD/.gpu}
export TUNING_STUDIO_BENCH_CACHE=${TUNING_STUDIO_BENCH_CACHE:-$(mktemp -d)}

say "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
python3 - <<'EOF'
import importlib.metadata as metadata
import sys

names = "torch triton transformers peft trl accelerate datasets pyarrow fsspec huggingface_hub tokenizers pydantic"
names += " typing_extensions liger_kernel bitsandbytes flash_attn"
found = []
for name in names.split():
    try:
        found.append(f"{name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        found.append(f"{name} -")
print(f"python {sys.version.split()[0]}; " + ", ".join(found))
EOF

if [ "${GPU_CHECKS:-1}" != 0 ]; then
say "bitsandbytes import"
if ! python3 -c "import bitsandbytes, torch; print('bitsandbytes', bitsandbytes.__version__, torch.version.cuda)"; then
    echo "bitsandbytes does not import: removed, so the other steps run without it (QLoRA rows will fail)"
    rm -rf /tmp/site/bitsandbytes /tmp/site/bitsandbytes-*
fi

# Liger's Triton kernels compile on first use and are cached on disk: compile them here for the benchmark model's
# shapes (bf16, hidden 768, 12 heads, MLP 2048; one row and a batch, lengths on and off a multiple of 16), so no
# arm's measured steps pay for a compile. A failure removes liger-kernel, and the engine runs without it.
say "Liger check and warm-up"
if ! GPU_BATCH=$BATCH python3 - <<'EOF'
import os

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.integrations.liger import apply_liger_kernel

batch = int(os.environ["GPU_BATCH"])
config = LlamaConfig(
    vocab_size=1295, hidden_size=768, num_hidden_layers=1, num_attention_heads=12, num_key_value_heads=12,
    intermediate_size=2048, max_position_embeddings=2048,
)  # fmt: skip
model = LlamaForCausalLM(config).to("cuda", torch.bfloat16)
model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", r=8, lora_alpha=16, target_modules="all-linear"))
apply_liger_kernel(model, {"fused_linear_cross_entropy": False})  # what TRL 1.16's SFTTrainer applies
for rows in (1, batch):
    for length in (33, 32, 1000):
        ids = torch.randint(0, 1295, (rows, length), device="cuda")
        positions = torch.arange(length, device="cuda").expand(rows, length)
        for extra in ({}, {"position_ids": positions}):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids, use_cache=False, **extra).loss
            loss.backward()
torch.cuda.synchronize()
print(f"liger kernels ran (forward and backward), last loss {loss.item():.3f}")
EOF
then
    echo "Liger's kernels failed: liger-kernel removed, the engine runs without them"
    rm -rf /tmp/site/liger_kernel /tmp/site/liger_kernel-*
fi
fi

if [ -n "${GPU_PROFILE:-}" ]; then
    say "0. profile_engine_step.py --arm $GPU_PROFILE (at most ${GPU_T_PROFILE:-75} s)"
    timeout "${GPU_T_PROFILE:-75}" python3 benchmarks/profile_engine_step.py --arm "$GPU_PROFILE" \
        --steps "${GPU_PROFILE_STEPS:-4}" --batch "$BATCH" --rows "$ROWS" 2>&1 | tee "$OUT/profile.txt"
    echo "profile_engine_step.py exit: ${PIPESTATUS[0]}"
fi

say "1. throughput_real.py (batch $BATCH, $STEPS steps an arm, $ROUNDS rounds, at most $T_THROUGHPUT s)"
# shellcheck disable=SC2086  # ARMS is a list of words
timeout "$T_THROUGHPUT" python3 benchmarks/throughput_real.py --arms $ARMS --rounds "$ROUNDS" --steps "$STEPS" \
    --trl-steps "$STEPS" --rows "$ROWS" --batch "$BATCH" 2>&1 | tee "$OUT/throughput_real.txt"
echo "throughput_real.py exit: ${PIPESTATUS[0]}"

if [ "$MEMORY_ARGS" != skip ]; then
    say "2. memory_estimate.py $MEMORY_ARGS (at most $T_MEMORY s)"
    # shellcheck disable=SC2086  # MEMORY_ARGS is a list of words
    timeout "$T_MEMORY" python3 benchmarks/memory_estimate.py $MEMORY_ARGS 2>&1 | tee "$OUT/memory_estimate.txt"
    echo "memory_estimate.py exit: ${PIPESTATUS[0]}"
fi
say "done"
