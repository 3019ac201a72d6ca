#!/usr/bin/env bash
# The throughput and memory steps of the GPU check at 87M only, as this script ran them before benchmarks/gpu_check.sh
# grew from it (benchmarks/README.md, "GPU figures"): its old variables map onto gpu_check.sh's (GPU_BATCH,
# GPU_STEPS, GPU_ROUNDS, GPU_ARMS, GPU_T_THROUGHPUT -> the _87M ones; GPU_ROWS, GPU_MEMORY_ARGS, GPU_T_MEMORY,
# GPU_NO_WHEELS, GPU_WHEELS, GPU_CHECKS and GPU_PROFILE as they are). No 1B model, no GPU tests.
export GPU_MODELS=87m GPU_TESTS=skip OUT=${OUT:-$PWD/gpu-figures}
export GPU_BATCH_87M=${GPU_BATCH:-${GPU_BATCH_87M:-16}} GPU_STEPS_87M=${GPU_STEPS:-${GPU_STEPS_87M:-40}}
export GPU_ROUNDS_87M=${GPU_ROUNDS:-${GPU_ROUNDS_87M:-2}} GPU_T_87M=${GPU_T_THROUGHPUT:-${GPU_T_87M:-270}}
export GPU_ARMS_87M=${GPU_ARMS:-${GPU_ARMS_87M:-engine bare trl-defaults engine-no-liger engine-padded}}
export GPU_MEMORY_ARGS=${GPU_MEMORY_ARGS:---jobs 12 --liger auto on} GPU_T_MEMORY=${GPU_T_MEMORY:-90}
exec bash "$(dirname "$0")/gpu_check.sh"
