"""Checkpoints of the local engine: safetensors for every tensor, JSON for everything else — never pickle.

Layout of `step_000N/`:
    actor/                      a complete Hugging Face model folder (weights, config, tokenizer, processor)
    optimizer.safetensors       AdamW moments per parameter index (+ param-group settings in the JSON header)
    rng.safetensors             torch CPU (and CUDA) generator states
    trainer_state.json          step, epoch, data position, KL coefficient, LR schedule, Python RNG, history
A folder is written under a temporary name and renamed when complete; `latest.json` is replaced atomically, so a
killed save never leaves a checkpoint that looks valid. Resuming restores all of it, so the next step is the step
the uninterrupted run would have taken.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from evr1_train.engine.trainer import LocalTrainer

LATEST = "latest.json"


def _atomic_json(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def _optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    sd = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, st in sd["state"].items():
        for k, v in st.items():
            if torch.is_tensor(v):
                tensors[f"{idx}.{k}"] = v.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(idx), {})[k] = v
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def save_checkpoint(trainer: LocalTrainer, root: Path) -> Path:
    """Write `root/step_000N` for the trainer's current step and point `root/latest.json` at it."""
    from safetensors.torch import save_file

    root.mkdir(parents=True, exist_ok=True)
    step = trainer.state.step
    final = root / f"step_{step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        trainer.model.save_pretrained(tmp / "actor", safe_serialization=True)
        trainer.processor.save_pretrained(tmp / "actor")
        tensors, meta = _optimizer_tensors(trainer.optimizer)
        save_file(tensors, str(tmp / "optimizer.safetensors"), metadata={"evr1": json.dumps(meta)})
        rng = {"torch_cpu": torch.random.get_rng_state()}
        if torch.cuda.is_available() and trainer.runtime.device.type == "cuda":
            for i, st in enumerate(torch.cuda.get_rng_state_all()):
                rng[f"torch_cuda_{i}"] = st
        save_file(rng, str(tmp / "rng.safetensors"))
        py_state = random.getstate()
        state = {
            "trainer": dataclasses.asdict(trainer.state),
            "scheduler": trainer.scheduler.state_dict(),
            "python_random": [py_state[0], list(py_state[1]), py_state[2]],
            "format": 1,
        }
        (tmp / "trainer_state.json").write_text(json.dumps(state, indent=1))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _atomic_json(root / LATEST, {"step": step, "path": final.name})
    return final


def latest_checkpoint(root: Path) -> Path | None:
    """The folder `latest.json` points to, when it exists and is complete."""
    pointer = root / LATEST
    if not pointer.exists():
        return None
    folder = root / json.loads(pointer.read_text())["path"]
    return folder if (folder / "trainer_state.json").exists() else None


def prune_checkpoints(root: Path, keep: int) -> None:
    """Delete all but the newest `keep` step folders (never the one `latest.json` names)."""
    if keep <= 0:
        return
    latest = latest_checkpoint(root)
    folders = sorted(p for p in root.glob("step_*") if p.is_dir())
    for old in folders[:-keep]:
        if latest is None or old.resolve() != latest.resolve():
            shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(trainer: LocalTrainer, folder: Path) -> None:
    """Restore weights, optimiser, schedule, RNG and data position from `folder` into `trainer`."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    from evr1_train.engine.policy import load_policy
    from evr1_train.engine.trainer import TrainState

    state_file = folder / "trainer_state.json"
    if not state_file.exists():
        raise FileNotFoundError(
            f"{folder} is not a complete evr1 checkpoint (no trainer_state.json); pick another step_* folder or set "
            "engine.resume=disable"
        )
    state = json.loads(state_file.read_text())
    model, _ = load_policy(str(folder / "actor"), trainer.runtime)
    model.train()
    trainer.model = model
    trainer.optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=trainer.cfg.lr,
        betas=trainer.cfg.betas,
        weight_decay=trainer.cfg.weight_decay,
    )
    with safe_open(str(folder / "optimizer.safetensors"), "pt") as f:
        meta = json.loads((f.metadata() or {})["evr1"])
    tensors = load_file(str(folder / "optimizer.safetensors"), device=str(trainer.runtime.device))
    opt_state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        idx, name = key.split(".", 1)
        opt_state.setdefault(int(idx), {})[name] = value
    for idx, extra in meta["scalars"].items():
        opt_state.setdefault(int(idx), {}).update(extra)
    for st in opt_state.values():  # AdamW keeps `step` on the CPU
        if "step" in st and torch.is_tensor(st["step"]):
            st["step"] = st["step"].cpu()
    trainer.optimizer.load_state_dict({"state": opt_state, "param_groups": meta["param_groups"]})
    trainer.scheduler = torch.optim.lr_scheduler.LambdaLR(trainer.optimizer, trainer._lr_factor)
    sched = dict(state["scheduler"])
    sched.pop("lr_lambdas", None)
    trainer.scheduler.load_state_dict({**trainer.scheduler.state_dict(), **sched})
    trainer.state = TrainState(**state["trainer"])
    rng = load_file(str(folder / "rng.safetensors"))
    torch.random.set_rng_state(rng["torch_cpu"])
    cuda = [rng[k] for k in sorted(rng) if k.startswith("torch_cuda_")]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    v, internal, gauss = state["python_random"]
    random.setstate((v, tuple(internal), gauss))
