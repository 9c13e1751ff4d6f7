"""Clear errors for model paths that do not exist, before a library turns them into a page of repo-id tracebacks.

A model path is either a local folder or a Hugging Face Hub id (`org/name`). What counts as "clearly a local path":
it starts with `/`, `./`, `../` or `~`, has more than one `/`, or names an existing file; with `HF_HUB_OFFLINE=1`
every path must be a local folder. Such a path that is not an existing folder is refused here, naming the config
key; anything else is tried as a Hub id and a failure is re-raised with the same clear first line.

An evr1 run folder (or its checkpoints) also names a model: its newest checkpoint's `actor/` (`resolve_model_path`).

Names (stable): resolve_model_path(path), check_model_path(path, key), explain_load_error(path, key, exc)
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from evr1_train.errors import ModelPathError

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def _offline() -> bool:
    return any(
        os.environ.get(v, "0").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "./", "../", "~")) or path.count("/") > 1 or not _HUB_ID.match(path)


def resolve_model_path(path: str) -> str:
    """An evr1 run folder, checkpoints folder or `step_N` folder -> its newest `actor/` folder; a verl checkpoint folder
    (`latest_checkpointed_iteration.txt`, e.g. of `evr1-train sft`) -> its newest `global_step_N/huggingface`;
    anything else as is."""
    folder = Path(path).expanduser()
    tracker = folder / "latest_checkpointed_iteration.txt"
    if tracker.is_file():
        hf = folder / f"global_step_{int(tracker.read_text().strip())}" / "huggingface"
        if hf.is_dir():
            return str(hf)
    for pointer in (folder / "checkpoints" / "latest.json", folder / "latest.json"):
        if pointer.is_file():
            step = json.loads(pointer.read_text())["path"]
            return str(pointer.parent / step / "actor")
    if (folder / "actor").is_dir() and (folder / "trainer_state.json").exists():
        return str(folder / "actor")
    return path


def check_model_path(path: str, key: str = "actor_rollout_ref.model.path") -> None:
    """Raise FileNotFoundError naming `key` when `path` cannot be a model (see the module docstring)."""
    if not path:
        raise ModelPathError(f"{key} is empty: give a Hugging Face model folder or a Hub id ({key}=PATH)")
    local = Path(path).expanduser()
    if local.is_dir():
        if not (local / "config.json").exists() and not (local / "adapter_config.json").exists():
            raise ModelPathError(
                f"{key}={path!r} is a folder but not a model: it has no config.json (a Hugging Face model folder "
                "holds config.json, the weights and the tokenizer/processor files)"
            )
        return
    if local.exists():
        raise ModelPathError(f"{key}={path!r} is a file; it must be a model folder (with config.json) or a Hub id")
    if _offline() or _looks_local(path):
        why = " (HF_HUB_OFFLINE is set, so it is not looked up on the Hub)" if _offline() else ""
        raise ModelPathError(f"{key}={path!r}: no such model folder{why}; check the path or build the model first")


def explain_load_error(path: str, key: str, exc: BaseException) -> ModelPathError:
    """A short error for a model that could not be loaded (the library's own message in one line)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if Path(path).expanduser().is_dir():
        return ModelPathError(f"{key}={path!r}: the folder could not be loaded as a model: {first}")
    return ModelPathError(
        f"{key}={path!r} is not a local folder, and loading it as a Hugging Face Hub model id failed: {first}"
    )
