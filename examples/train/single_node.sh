#!/bin/bash
# One node, 8 GPUs: GRPO on Qwen2.5-VL-7B with hybrid offline+online groups.
# Usage: examples/train/single_node.sh CACHE_DIR [extra hydra overrides...]
set -euo pipefail
CACHE=${1:?the evr1-cache build --out folder}; shift
evr1-train +experiment=qwen2_5_vl_7b_grpo_hybrid \
  data.train_files="$CACHE/train.evr1.jsonl" data.val_files="$CACHE/val.evr1.jsonl" \
  data.evr1.cache_dir="$CACHE" data.evr1.video_source=cache_only \
  trainer.n_gpus_per_node=8 trainer.nnodes=1 trainer.total_epochs=1 trainer.save_freq=50 trainer.test_freq=25 \
  trainer.logger='[console,tensorboard]' "$@"
