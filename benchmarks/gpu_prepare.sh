#!/usr/bin/env bash
# Prepare what the GPU check (benchmarks/gpu_check.sh) carries to a lent GPU machine, on this CPU machine, before any
# device time is spent (benchmarks/README.md, "GPU figures"):
#   .whl/        wheels of the packages the machine's image lacks or has older, each pinned to the version this
#                project's own environment runs (so the GPU runs what the CPU tests ran), for CPython 3.12 on x86-64
#                Linux; bitsandbytes' wheel repacked with its CPU and CUDA 13.0 libraries only (41 -> 4 MiB: the
#                image's torch is built for CUDA 13.0);
#   .gpu/        the two benchmark datasets; and repo/, a snapshot of HEAD's engine, benchmarks, tests and assets, only
#                when the checkout holds uncommitted work (it would travel and run too; the snapshot is what runs then).
# It ends by printing the size of what travels against the 64 MiB a device call carries, and the call to make.
#
#   bash benchmarks/gpu_prepare.sh     # PYTHON (default .venv/bin/python) gives the versions; GPU_SNAPSHOT=1 forces one
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
PY_VERSION=${GPU_PYTHON_VERSION:-3.12}
CUDA_KEEP=${GPU_CUDA_KEEP:-cuda130}
DATASETS=${GPU_DATASETS:-../shared/datasets}
LIMIT_MIB=64
# What the machine's image lacks or has too old (measured on the lent H100 / H200 at 87f92e6): the training stack, its
# data side, Liger and bitsandbytes, and what the sweep test's optuna needs.
PACKAGES=(trl datasets dill multiprocess fsspec pydantic pydantic_core annotated-types typing-inspection
    typing_extensions liger-kernel bitsandbytes transformers peft optuna SQLAlchemy alembic Mako colorlog)

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
"$PYTHON" benchmarks/gpu_wheels.py size . --limit-mib "$LIMIT_MIB" --exclude .git .venv
echo "The device call (run tool): carry [\".whl\", \".gpu\"], timeout_s 570, command:"
echo "$command"
