#!/usr/bin/env bash
# The issue's device check on one NVIDIA GPU (see perf/gpu_train_check.py's docstring):
# ~5 steps of a small random Qwen2.5-VL, FSDP2 at world size 1, bf16, vLLM colocated with
# sleep/wake and in-memory (CUDA IPC) weight sync; exits non-zero unless the synced engine's
# greedy tokens equal the actor's. Killed after 8 minutes so a hang cannot eat the budget.
#   bash perf/gpu_train_check.sh              # on the GPU machine, from the repository root
#   bash perf/gpu_train_check.sh --dry-run    # the same code on CPU (tiny model, no vLLM)
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec timeout --signal=KILL 480 python perf/gpu_train_check.py --steps 5 "$@"
