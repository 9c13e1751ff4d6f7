"""`evr1-train sft [OVERRIDE ...]`: supervised fine-tuning on verl's SFT trainer with evr1 rows and cached frames.

verl 0.9.1's engine-based SFT trainer (`verl.trainer.sft_trainer`, config `sft_trainer_engine`) trains vision-language
models from a dataset class (`data.custom_cls`) and the model's processor; `conf/evr1_sft.yaml` extends that config
with `Evr1SFTDataset` (the RL prompts, the frame cache) and saves a Hugging Face model folder with every checkpoint,
so RL starts from it with `actor_rollout_ref.model.path=<trainer.default_local_dir>` (its newest
`global_step_N/huggingface`). The trainer is a torchrun program: this command starts
`torchrun --standalone --nproc_per_node=N -m evr1_train.verl_sft ...` with N = `trainer.n_gpus_per_node` (default:
the visible GPUs), or runs in this process when it already is a torchrun worker.

    evr1-train sft +sft_experiment=qwen2_5_vl_7b data.train_files=cache/train.evr1.jsonl data.evr1.cache_dir=cache
    evr1-train +experiment=qwen2_5_vl_7b_grpo actor_rollout_ref.model.path=checkpoints/evr1-sft/qwen2_5_vl_7b_sft ...

Names (stable): main(argv) -> int, run_sft(cfg)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any


def _gpus(argv: Sequence[str]) -> int:
    for arg in argv:
        if arg.startswith("trainer.n_gpus_per_node="):
            return int(arg.split("=", 1)[1])
    import torch

    return max(1, int(torch.cuda.device_count()))


def run_sft(cfg: Any) -> None:
    """Check evr1's keys, then verl's own SFT entry (device, process group, trainer)."""
    from verl.trainer.sft_trainer import run_sft as verl_run_sft
    from verl.utils.device import auto_set_device

    from evr1_cache import check_model_path, resolve_model_path
    from evr1_train.data.options import DataOptions

    cfg.model.path = resolve_model_path(str(cfg.model.path))
    check_model_path(str(cfg.model.path), "model.path", adapter_ok=True)
    DataOptions.from_mapping(cfg.data.evr1)  # unknown or inconsistent data.evr1 keys fail before torch.distributed
    auto_set_device(cfg)
    verl_run_sft(cfg)


def _hydra_main(argv: Sequence[str]) -> None:
    import hydra

    from evr1_train.errors import ConfigError
    from evr1_train.quiet import quiet_third_party

    quiet_third_party()
    sys.argv = [sys.argv[0], *argv]

    def _train(cfg: Any) -> None:
        try:
            run_sft(cfg)
        except (ConfigError, ValueError) as exc:
            print(f"evr1-train sft: error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None

    hydra.main(config_path="conf", config_name="evr1_sft", version_base=None)(_train)()


def main(argv: Sequence[str]) -> int:  # returns only for --help and inside torchrun
    args = list(argv)
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0
    if "LOCAL_RANK" in os.environ:  # already a torchrun worker
        _hydra_main(args)
        return 0
    n = _gpus(args)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}"]
    os.execv(sys.executable, [*cmd, "-m", "evr1_train.verl_sft", *args])


if __name__ == "__main__":
    _hydra_main(sys.argv[1:])
