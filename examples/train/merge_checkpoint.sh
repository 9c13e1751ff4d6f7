#!/bin/bash
# Merge verl's FSDP actor shards of one step into a Hugging Face checkpoint (verl's own merger).
# Usage: examples/train/merge_checkpoint.sh checkpoints/evr1/EXPERIMENT/global_step_N/actor OUT_DIR
set -euo pipefail
python -m verl.model_merger merge --backend fsdp --local_dir "${1:?actor checkpoint folder}" --target_dir "${2:?output}"
python - "$2" <<'PY'
import sys
from transformers import AutoConfig, AutoProcessor
cfg = AutoConfig.from_pretrained(sys.argv[1])
AutoProcessor.from_pretrained(sys.argv[1])
print(f"merged {cfg.model_type} checkpoint at {sys.argv[1]}: loads with transformers")
PY
