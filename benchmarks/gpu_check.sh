#!/usr/bin/env bash
# The GPU check of issue 29, one run on a lent H100 or H200 in about 9 minutes (benchmarks/README.md, "GPU figures"),
# each step under its own time limit, a failing step not stopping the next; the order puts first what the first run
# on an H200 (f3a0a11) left unmeasured or failed:
#   1. at once: the GPU tests (tests/gpu: every method, a sweep, Chat, Evaluate, a merged export; and the CUDA cases
#      of the padding-free loss-equality test) and memory_estimate.py's rows;
#   2. throughput_real.py at 87M: the engine (sdpa without cuDNN), its variants (Liger on at 768, FlexAttention,
#      fp32 master weights, padding-free per row) and then the bare script and TRL's defaults;
#   3. throughput_real.py at ~1B: engine, the engine without Liger (auto takes it there), bare, TRL's defaults.
# An arm a step's limit cuts is reported as not measured; the arms before it keep their figures.
# Then ONE line per item (benchmarks/gpu_summary.py): ok, the figures, or FAILED: why. Each step's output goes to
# $OUT (throughput.txt, gpu_tests.txt, memory_estimate.txt, summary.json); the caller tees the whole output.
#
# Packages the machine lacks come as wheels in $GPU_WHEELS (default .whl/), the two datasets in
# $TUNING_STUDIO_BENCH_DATASETS (default .gpu/); benchmarks/README.md says which and how. GPU_NO_WHEELS=1 skips the
# install (a machine that has the packages; the dry run on a CPU, with GPU_CHECKS=0 and small sizes:
#   GPU_NO_WHEELS=1 GPU_CHECKS=0 GPU_TESTS_ON_CPU=1 GPU_TEST_WORKERS=2 GPU_ROWS=8 GPU_BATCH_87M=2 GPU_STEPS_87M=2 \
#   GPU_ARMS_87M="engine bare" GPU_MODELS=87m GPU_MEMORY_ARGS="--only freeze-256" bash benchmarks/gpu_check.sh
# ; without GPU_NO_WHEELS and with python3 a CPython 3.12 venv that has the image's packages, the same dry run installs
# the carried wheels into it and so tries them). Sizes and limits from the environment: GPU_MODELS (87m 1b),
# GPU_ARMS_87M / _1B, GPU_ROUNDS_87M / _1B, GPU_STEPS_87M / _1B, GPU_BATCH_87M / _1B, GPU_ROWS, GPU_TEST_WORKERS,
# GPU_MEMORY_ARGS (skip: no memory step), GPU_TESTS (skip: no tests), and the time limits in seconds GPU_T_87M,
# GPU_T_1B, GPU_T_TESTS, GPU_T_MEMORY (the tests and the memory step run side by side). GPU_PROFILE=ARM first
# profiles that engine arm at 87M (benchmarks/profile_engine_step.py, GPU_PROFILE_STEPS steps, at most GPU_T_PROFILE s).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check}
mkdir -p "$OUT"
WORK=$(mktemp -d)
MODELS=${GPU_MODELS:-87m 1b}
ARMS_87M=${GPU_ARMS_87M:-engine engine-liger engine-flex engine-fp32-weights bare trl-defaults engine-free}
ARMS_1B=${GPU_ARMS_1B:-engine engine-no-liger bare trl-defaults}
ROWS=${GPU_ROWS:-1000}
MEMORY_ARGS=${GPU_MEMORY_ARGS:---jobs 12 --liger auto on}
T_TESTS=${GPU_T_TESTS:-200}  # 171 s with 8 workers on an H200 (alone)
T_MEMORY=${GPU_T_MEMORY:-120}
started=$SECONDS
say() { echo "== $* (at $((SECONDS - started)) s)"; }

if [ -z "${GPU_NO_WHEELS:-}" ]; then
    # Into python3's own environment (the lent machine is bare and given back afterwards), not a --target folder on
    # PYTHONPATH: the tests start `python -m engine ...` with a PYTHONPATH of their own (tests/helpers/engine_cli.py).
    say "installing the carried wheels into $(python3 -c 'import sys; print(sys.prefix)')"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        "${GPU_WHEELS:-.whl}"/*.whl || exit 1
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRL_EXPERIMENTAL_SILENCE=1
export TUNING_STUDIO_BENCH_DATASETS=${TUNING_STUDIO_BENCH_DATASETS:-$PWD/.gpu}
export TUNING_STUDIO_BENCH_CACHE=${TUNING_STUDIO_BENCH_CACHE:-$WORK/cache}

say "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null \
    || echo "no nvidia-smi: no NVIDIA GPU here"
python3 benchmarks/gpu_packages.py

if [ "${GPU_CHECKS:-1}" != 0 ]; then
    say "bitsandbytes import, Liger's kernels compiled for the 87M and 1B shapes"
    python3 benchmarks/gpu_packages.py --check-bitsandbytes || python3 -m pip uninstall -q -y bitsandbytes
    python3 benchmarks/gpu_packages.py --warm-liger || python3 -m pip uninstall -q -y liger-kernel
fi

# step NAME LIMIT_S OUTPUT_FILE COMMAND...: run with a time limit, its output appended to $OUT/OUTPUT_FILE and
# shown; its exit status kept as $WORK/NAME.exit for the summary (124: the limit cut it).
step() {
    local name=$1 limit=$2 file=$3
    shift 3
    timeout -k 15 "$limit" "$@" 2>&1 | tee -a "$OUT/$file"
    local code=${PIPESTATUS[0]}
    echo "$code" > "$WORK/$name.exit"
    echo "$name exit: $code"
}

if [ -n "${GPU_PROFILE:-}" ]; then
    say "0. profile_engine_step.py --arm $GPU_PROFILE (at most ${GPU_T_PROFILE:-75} s)"
    step profile "${GPU_T_PROFILE:-75}" profile.txt python3 benchmarks/profile_engine_step.py --arm "$GPU_PROFILE" \
        --steps "${GPU_PROFILE_STEPS:-4}" --batch "${GPU_BATCH_87M:-16}" --rows "$ROWS"
fi

say "1. the GPU tests (at most $T_TESTS s) beside memory_estimate.py $MEMORY_ARGS (at most $T_MEMORY s)"
if [ "${GPU_TESTS:-}" != skip ]; then
    # The sweep test needs optuna, which gpu_prepare.sh leaves out when the carry would pass its limit (its reason in
    # .whl/LEFT_OUT.txt): then the test is not collected and the summary gives that reason.
    without=()
    if ! python3 -c "import optuna" 2> /dev/null; then
        cat "${GPU_WHEELS:-.whl}/LEFT_OUT.txt" 2> /dev/null > "$WORK/sweep.skipped" \
            || echo "optuna does not import here" > "$WORK/sweep.skipped"
        echo "the sweep test is skipped: $(cat "$WORK/sweep.skipped")"
        without=(--ignore tests/gpu/test_sweep_gpu.py)
    fi
    # Tests spread one by one over the workers (the trained run that Chat, Evaluate and the export share stays
    # on one worker: its xdist group); the repository's pytest settings otherwise (pyproject.toml).
    step gpu-tests "$T_TESTS" gpu_tests.txt python3 -m pytest tests/gpu tests/engine/training/test_padding_free.py \
        "${without[@]}" -q -rfEs -n "${GPU_TEST_WORKERS:-8}" --dist loadgroup --junitxml "$WORK/gpu-tests.xml" \
        > /dev/null &
fi
if [ "$MEMORY_ARGS" != skip ]; then
    # shellcheck disable=SC2086  # MEMORY_ARGS is a list of words
    step memory "$T_MEMORY" memory_estimate.txt python3 benchmarks/memory_estimate.py $MEMORY_ARGS > /dev/null
fi
wait
[ -f "$OUT/memory_estimate.txt" ] && cat "$OUT/memory_estimate.txt" && cp "$OUT/memory_estimate.txt" "$WORK/"
[ -f "$OUT/gpu_tests.txt" ] && tail -n 30 "$OUT/gpu_tests.txt"

number=2
for model in $MODELS; do
    upper=$(echo "$model" | tr a-z A-Z)
    arms_var=ARMS_$upper rounds_var=GPU_ROUNDS_$upper steps_var=GPU_STEPS_$upper batch_var=GPU_BATCH_$upper
    limit_var=GPU_T_$upper
    arms=${!arms_var:-engine bare trl-defaults}
    rounds=${!rounds_var:-1}
    # An arm takes 40-45 s on an H200 at either size (its process, the model, 16 or 10 steps): the limits give the
    # first four at 87M and the first two at ~1B; with ~45 s of set-up and the tests before: at most ~550 s.
    if [ "$model" = 1b ]; then steps=${!steps_var:-10} batch=${!batch_var:-8} limit=${!limit_var:-110}
    else steps=${!steps_var:-16} batch=${!batch_var:-16} limit=${!limit_var:-190}; fi
    say "$number. throughput_real.py --model $model ($arms; batch $batch, $steps steps, $rounds round(s), at most $limit s)"
    # shellcheck disable=SC2086  # arms is a list of words
    step "throughput-$model" "$limit" throughput.txt python3 benchmarks/throughput_real.py --model "$model" \
        --arms $arms --rounds "$rounds" --steps "$steps" --trl-steps "$steps" --rows "$ROWS" --batch "$batch" \
        --json "$WORK/throughput-$model.json"
    number=$((number + 1))
done

say "summary: one line per item"
python3 benchmarks/gpu_summary.py "$WORK" --json "$OUT/summary.json"
rm -rf "$WORK"  # the built models too (their figures are in summary.json)
say "done"
