#!/usr/bin/env bash
# One-command GPU check of the training side (the local-engine quickstart on CUDA in bf16, then
# benchmarks/train_step_cache.py on CUDA); everything it does is described in benchmarks/gpu_check.py.
#   bash benchmarks/gpu_check.sh                 # on the GPU machine, after `python3 benchmarks/gpu_check.py --prepare`
#   bash benchmarks/gpu_check.sh --device cpu    # the same steps on CPU (dry run)
# PYTHON picks the interpreter that holds torch, transformers and torchvision (default: python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python3}" benchmarks/gpu_check.py "$@"
