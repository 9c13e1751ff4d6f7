#!/bin/bash
# The verl smoke test on ONE GPU, without any CPU adaptation: a tiny random Qwen2.5-VL, generated videos cached by
# evr1-cache, 3 GRPO steps with hybrid groups (vLLM rollout, FSDP actor). Needs `pip install "evr1-train[vllm]"`
# (or any verl-compatible vLLM + CUDA torch) and ffmpeg. Usage: examples/train/gpu_smoke.sh [WORKDIR]
set -euo pipefail
WORK=${1:-$(mktemp -d)}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
python - "$WORK" "$ROOT" <<'PY'
import json, sys
from pathlib import Path
work, root = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, str(root / "testenv" / "verl_cpu"))
from run_smoke import make_data, make_model   # same data and model builders as the CPU smoke run
data, cache = make_data(work, rows=8)
model = make_model(work)
(work / "paths.json").write_text(json.dumps({"data": str(data), "cache": str(cache), "model": str(model)}))
PY
DATA=$(python -c "import json;print(json.load(open('$WORK/paths.json'))['data'])")
CACHE=$(python -c "import json;print(json.load(open('$WORK/paths.json'))['cache'])")
MODEL=$(python -c "import json;print(json.load(open('$WORK/paths.json'))['model'])")
VERL_FILE_LOGGER_PATH="$WORK/metrics.jsonl" evr1-train engine=verl algorithm.adv_estimator=grpo \
  data.train_files="$DATA" data.val_files="$DATA" data.train_batch_size=4 \
  data.max_prompt_length=512 data.max_response_length=32 \
  data.evr1.cache_dir="$CACHE" data.evr1.video_source=cache_only \
  data.evr1.video.max_frames=4 data.evr1.video.min_frames=2 data.evr1.video.min_pixels=3136 \
  data.evr1.video.max_pixels=3136 data.evr1.image.min_pixels=3136 data.evr1.image.max_pixels=3136 \
  actor_rollout_ref.model.path="$MODEL" actor_rollout_ref.actor.ppo_mini_batch_size=4 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.actor.use_kl_loss=false \
  actor_rollout_ref.rollout.n=4 actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.3 actor_rollout_ref.rollout.max_model_len=1024 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4 \
  evr1.hybrid.enable=true evr1.hybrid.k=1 evr1.hybrid.offline_handling=off_policy \
  trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.total_training_steps=3 trainer.logger='[console,file]' \
  trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1 \
  reward.num_workers=1 actor_rollout_ref.rollout.agent.num_workers=1 +ray_kwargs.ray_init.num_cpus=16
python - "$WORK/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(rows) == 3, f"expected 3 logged steps, got {len(rows)}"
for r in rows:
    d = r.get("data", r)
    print(r.get("step"), {k: d.get(k) for k in ("critic/score/mean", "timing_s/step",
          "evr1/hybrid/offline_samples", "evr1/hybrid/online_samples", "actor/evr1_offline_token_frac")})
assert any(r.get("data", r).get("evr1/hybrid/offline_samples", 0) > 0 for r in rows), "no offline samples"
print("GPU smoke test: OK")
PY
