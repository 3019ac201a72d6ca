#!/usr/bin/env bash
# Prepare what the GPU check (benchmarks/gpu_check.sh) carries to a lent GPU machine, on this CPU machine, before any
# device time is spent (benchmarks/README.md, "GPU figures"):
#   .whl/        wheels of the packages the machine's image lacks or has older, each pinned to the version this
#                project's own environment runs (so the GPU runs what the CPU tests ran), for CPython 3.12 on x86-64
#                Linux, three of them slimmed (benchmarks/gpu_wheels.py slim): bitsandbytes to its CPU and CUDA 13.0
#                libraries (41.1 -> 3.4 MiB: the image's torch is built for CUDA 13.0); transformers to the model
#                families the check loads (MODELS) and those something imports at module level (12.9 -> 3.2 MiB;
#                every other family keeps its __init__.py and tokenizer files); SQLAlchemy to its pure-Python modules
#                (4.5 -> 2.0 MiB);
#   .gpu/        the two benchmark datasets; and repo/, a snapshot of HEAD's engine, benchmarks, tests and assets, only
#                when the checkout holds uncommitted work (it would travel and run too; the snapshot is what runs then).
# It ends by printing the size of what travels against the 64 MiB a device call carries (a clean checkout of a139abd
# with this script: 50.5 MiB, 33.2 of them tracked files, 15.7 wheels; 62.7 before transformers and SQLAlchemy were
# slimmed), and the call to make. Past the limit it leaves out the wheels only the sweep test needs (OPTIONAL below),
# says so and writes why to .whl/LEFT_OUT.txt: the check then reports the sweep test as skipped for that reason (try
# it with GPU_LIMIT_MIB=50); still past it, it exits 1.
#
#   bash benchmarks/gpu_prepare.sh     # PYTHON (default .venv/bin/python) gives the versions; GPU_SNAPSHOT=1 forces one
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
PY_VERSION=${GPU_PYTHON_VERSION:-3.12}
CUDA_KEEP=${GPU_CUDA_KEEP:-cuda130}
DATASETS=${GPU_DATASETS:-../shared/datasets}
LIMIT_MIB=${GPU_LIMIT_MIB:-64}  # a device call's carry; lower only to try the over-the-limit path
# What the machine's image lacks or has too old (measured on the lent H100 / H200 at 87f92e6): the training stack, its
# data side, Liger and bitsandbytes, and what the sweep test's optuna needs (OPTIONAL: left out past the limit).
OPTIONAL=(optuna SQLAlchemy alembic Mako colorlog)
PACKAGES=(trl datasets dill multiprocess fsspec pydantic pydantic_core annotated-types typing-inspection
    typing_extensions liger-kernel bitsandbytes transformers peft "${OPTIONAL[@]}")
# The transformers model families the check loads: the bundled models' (assets/demo-model: llama; assets/demo-vlm:
# llava with a clip vision tower) and the benchmarks' built models (throughput_real.py's 87M and ~1B,
# memory_estimate.py's: LlamaConfig), and the auto classes. slim adds what transformers, the other wheels and the code
# the check runs import (SCAN).
MODELS=(auto llama llava clip)
SCAN=(.whl engine benchmarks tests/gpu tests/engine/training/test_padding_free.py)

# The version of a package this CPU environment lacks (Liger's kernels need a GPU), as measured at 87f92e6.
declare -A ABSENT_HERE=([liger-kernel]=0.8.5)

rm -rf .whl && mkdir -p .whl
for name in "${PACKAGES[@]}"; do
    version=$("$PYTHON" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name" 2>/dev/null) \
        || version=${ABSENT_HERE[$name]:?"$name is not installed here and has no version in ABSENT_HERE"}
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
        --platform any -d .whl "$name==$version"
done
"$PYTHON" benchmarks/gpu_wheels.py slim .whl/bitsandbytes-*.whl --keep cpu "$CUDA_KEEP"
"$PYTHON" benchmarks/gpu_wheels.py slim .whl/transformers-*.whl --models "${MODELS[@]}" --scan "${SCAN[@]}"
"$PYTHON" benchmarks/gpu_wheels.py slim .whl/sqlalchemy-*.whl --pure-python

rm -rf .gpu && mkdir -p .gpu
cp "$DATASETS/alpaca_en_demo.json" "$DATASETS/c4_demo.jsonl" .gpu/
uncommitted=$(git status --porcelain --untracked-files=normal | grep -v -e ' \.whl/' -e ' \.gpu/' || true)
if [ -n "$uncommitted" ] || [ "${GPU_SNAPSHOT:-0}" = 1 ]; then
    # The demo model's weights already travel in the working tree: the device command copies them into the snapshot.
    mkdir -p .gpu/repo
    git archive HEAD engine benchmarks tests assets/demo-model assets/presets assets/datasets pyproject.toml \
        | tar -x -C .gpu/repo
    rm .gpu/repo/assets/demo-model/model.safetensors
    command='R=$PWD; set -o pipefail; cp $R/assets/demo-model/model.safetensors .gpu/repo/assets/demo-model/ && cd .gpu/repo && GPU_WHEELS=$R/.whl TUNING_STUDIO_BENCH_DATASETS=$R/.gpu bash benchmarks/gpu_check.sh 2>&1 | tee $OUT/log.txt'
else
    command='set -o pipefail; GPU_WHEELS=$PWD/.whl TUNING_STUDIO_BENCH_DATASETS=$PWD/.gpu bash benchmarks/gpu_check.sh 2>&1 | tee $OUT/log.txt'
fi

ls -1 .whl
sized=$("$PYTHON" benchmarks/gpu_wheels.py size . --limit-mib "$LIMIT_MIB" --exclude .git .venv) && fits=1 || fits=0
echo "$sized"
if [ "$fits" = 0 ]; then
    # Over the limit: the sweep test's wheels go first (the rest is what every other item needs).
    for name in "${OPTIONAL[@]}"; do
        rm -f .whl/"$(echo "$name" | tr 'A-Z-' 'a-z_')"-*.whl
    done
    echo "${OPTIONAL[*]} not carried (gpu_prepare.sh left them out: with them ${sized%: TOO BIG})" \
        | tee .whl/LEFT_OUT.txt
    echo "the GPU check reports the sweep test as skipped for that reason"
    "$PYTHON" benchmarks/gpu_wheels.py size . --limit-mib "$LIMIT_MIB" --exclude .git .venv
fi
echo "The device call (run tool): carry [\".whl\", \".gpu\"], timeout_s 570, command:"
echo "$command"
