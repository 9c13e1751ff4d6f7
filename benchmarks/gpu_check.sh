#!/usr/bin/env bash
# The GPU check in one command (docs/gpu.md): random-weight Qwen3-VL at the published 2B / 8B (/ 4B) shapes on one
# GPU, stage by stage within a time budget; everything it does is described in benchmarks/gpu_check.py.
#   bash benchmarks/gpu_check.sh --out gpu-check-results   # on the GPU machine, after `python3 benchmarks/gpu_check.py --prepare`
#   bash benchmarks/gpu_check.sh --tiny                     # every stage at tiny shapes on CPU (the dry run)
# PYTHON picks the interpreter that holds torch, transformers, torchvision and peft (default: python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python3}" benchmarks/gpu_check.py "$@"
