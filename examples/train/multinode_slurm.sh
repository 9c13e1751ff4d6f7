#!/bin/bash
#SBATCH --job-name=evr1-train
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --exclusive
# Multi-node verl run: a Ray head on the first node, workers on the others, then evr1-train from the head.
# Every node needs the same Python environment and the cache folder at the same (shared) path.
# Usage: sbatch examples/train/multinode_slurm.sh /shared/cache [extra hydra overrides...]
set -euo pipefail
CACHE=${1:?shared cache folder}; shift
NODES=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
HEAD=${NODES[0]}
PORT=6379
srun --nodes=1 --ntasks=1 -w "$HEAD" ray start --head --port=$PORT --num-gpus=8 --block &
sleep 20
for node in "${NODES[@]:1}"; do
  srun --nodes=1 --ntasks=1 -w "$node" ray start --address="$HEAD:$PORT" --num-gpus=8 --block &
done
sleep 30
export RAY_ADDRESS="$HEAD:$PORT"
srun --overlap --nodes=1 --ntasks=1 -w "$HEAD" evr1-train +experiment=qwen3_vl_8b_dapo_hybrid \
  trainer.nnodes=${#NODES[@]} trainer.n_gpus_per_node=8 \
  data.train_files="$CACHE/train.evr1.jsonl" data.val_files="$CACHE/val.evr1.jsonl" data.evr1.cache_dir="$CACHE" \
  "$@"
