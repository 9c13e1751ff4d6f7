"""Checkpoints of the local engine on disk: safetensors for every tensor, JSON for everything else — never pickle.

Layout of `step_000N/`:
    actor/                      the weights as the model writes them: a complete Hugging Face model folder (weights,
                                config, tokenizer, processor), or a PEFT adapter folder when LoRA is on
    optimizer.safetensors       torch optimiser state tensors by `<param index>.<name>` (+ the rest in the JSON header)
    rng.safetensors             torch CPU generator state (`torch_cpu`) and one per CUDA device index (`cuda.<i>`)
    trainer_state.json          step, epoch, data position, KL coefficient, LR schedule, Python RNG, history
    evr1_train_protocol.json    how the model was prompted and sampled (see docs/train.md), for evaluation
A folder is written under a temporary name and renamed when complete; `latest.json` is replaced atomically, so a
killed save never leaves a checkpoint that looks valid.

This module does disk I/O only: it takes and returns `TrainerState` values (`LocalTrainer.state_dict()` /
`load_state_dict()`), and the model writes and reads its own `actor/` folder through the callables it is given.

Names (stable): save_checkpoint, load_checkpoint, latest_checkpoint, prune_checkpoints, LATEST, FORMAT
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from evr1_cache.atomic import atomic_folder, atomic_json
from evr1_train.engine.state import TrainerState, python_random_from_json, python_random_to_json

LATEST = "latest.json"
STATE_FILE = "trainer_state.json"
FORMAT = 2  # 2: RNG keyed by device index, optimiser state as torch's state_dict


def _optimizer_split(sd: Mapping[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """torch optimiser state_dict -> (tensors by `<index>.<name>`, JSON-able rest)."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, st in sd["state"].items():
        for k, v in st.items():
            if torch.is_tensor(v):
                tensors[f"{idx}.{k}"] = v.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(idx), {})[k] = v
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def _optimizer_join(tensors: Mapping[str, torch.Tensor], meta: Mapping[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    for idx, extra in meta["scalars"].items():
        state.setdefault(int(idx), {}).update(extra)
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(
    root: Path,
    state: TrainerState,
    write_actor: Callable[[Path], None],
    extra_files: Mapping[str, Any] | None = None,
) -> Path:
    """Write `root/step_000N` for `state` and point `root/latest.json` at it.

    `write_actor(folder)` writes the model's own folder; `extra_files` are JSON files written beside it.
    """
    from safetensors.torch import save_file

    step = int(state.trainer["step"])
    final = root / f"step_{step:06d}"
    with atomic_folder(final) as tmp:
        write_actor(tmp / "actor")
        tensors, meta = _optimizer_split(state.optimizer)
        save_file(tensors, str(tmp / "optimizer.safetensors"), metadata={"evr1": json.dumps(meta)})
        save_file({k: v.contiguous() for k, v in state.rng.items()}, str(tmp / "rng.safetensors"))
        record = {
            "trainer": dict(state.trainer),
            "scheduler": dict(state.scheduler),
            "python_random": python_random_to_json(state.python_random),
            "format": FORMAT,
        }
        (tmp / STATE_FILE).write_text(json.dumps(record, indent=1))
        for name, data in (extra_files or {}).items():
            (tmp / name).write_text(json.dumps(data, indent=1))
    atomic_json(root / LATEST, {"step": step, "path": final.name})
    return final


def load_checkpoint(folder: Path, read_actor: Callable[[Path], Mapping[str, torch.Tensor]]) -> TrainerState:
    """Read `folder` back into a `TrainerState` (tensors on the CPU); `read_actor(folder / "actor")` gives weights."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    state_file = folder / STATE_FILE
    if not state_file.exists():
        raise FileNotFoundError(
            f"{folder} is not a complete evr1 checkpoint (no {STATE_FILE}); pick another step_* folder or set "
            "engine.resume=disable"
        )
    record = json.loads(state_file.read_text())
    if record.get("format") != FORMAT:
        raise ValueError(
            f"{folder} was written by another evr1 version (checkpoint format {record.get('format')}, this one reads "
            f"{FORMAT}); resume it with that version, or start over with engine.resume=disable"
        )
    opt_file = str(folder / "optimizer.safetensors")
    with safe_open(opt_file, "pt") as f:
        meta = json.loads((f.metadata() or {})["evr1"])
    sched = dict(record["scheduler"])
    sched.pop("lr_lambdas", None)  # a function of the config, rebuilt by the trainer
    return TrainerState(
        model=read_actor(folder / "actor"),
        optimizer=_optimizer_join(load_file(opt_file), meta),
        scheduler=sched,
        trainer=record["trainer"],
        rng=load_file(str(folder / "rng.safetensors")),
        python_random=python_random_from_json(record["python_random"]),
    )


def latest_checkpoint(root: Path) -> Path | None:
    """The folder `latest.json` points to (`evr1_cache.latest_step`, its one reader), when it exists and is complete."""
    from evr1_cache import latest_step

    folder = latest_step(root)
    return folder if folder is not None and (folder / STATE_FILE).exists() else None


def prune_checkpoints(root: Path, keep: int) -> None:
    """Delete all but the newest `keep` step folders (never the one `latest.json` names)."""
    if keep <= 0:
        return
    latest = latest_checkpoint(root)
    folders = sorted(p for p in root.glob("step_*") if p.is_dir())
    for old in folders[:-keep]:
        if latest is None or old.resolve() != latest.resolve():
            shutil.rmtree(old, ignore_errors=True)
