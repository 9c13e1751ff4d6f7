#!/bin/bash
# Cache every video and image of a training and a validation file once (run on any machine with the media).
# The budget flags must match the training config's data.evr1.video / data.evr1.image (Qwen2.5-VL defaults here).
# Usage: examples/train/prepare_data.sh DATA_DIR CACHE_DIR [WORKERS]
set -euo pipefail
DATA=${1:?data folder holding train.jsonl and val.jsonl}
CACHE=${2:?output cache folder}
WORKERS=${3:-8}
for split in train val; do
  evr1-cache build "$DATA/$split.jsonl" --out "$CACHE" --fps 2 --min-frames 4 --max-frames 64 \
    --min-pixels 100352 --max-pixels 602112 --size-factor 28 \
    --image-min-pixels 3136 --image-max-pixels 1003520 --workers "$WORKERS"
done
evr1-cache verify "$CACHE"
echo "train on $CACHE/train.evr1.jsonl and $CACHE/val.evr1.jsonl with data.evr1.cache_dir=$CACHE"
