"""Model paths as users give them (a local folder or a Hugging Face Hub id), checked before an engine loads them.

Why: transformers and vLLM answer a mistyped folder with a page of tracebacks about repository ids (the folder is
taken for a Hub id, then the Hub lookup fails or is offline). Training and evaluation both need one line that names
the setting (`key`: `--model`, `actor_rollout_ref.model.path`, ...), the path and the fix, so both call this module.

- `looks_local(path)`: a string no Hub id can be (absolute, `./`, `../`, `~`, a backslash, more than one `/`, or not
  of the `org/name` / `name` form).
- `check_model_path(path, key)`: the path as a loader should get it (`~` expanded), or `ModelPathError`: a local path
  that is missing, a file, or a folder without `config.json` (an evr1-train checkpoint or run folder is named as one);
  with `HF_HUB_OFFLINE` / `TRANSFORMERS_OFFLINE` set, a Hub id that is not in the local Hugging Face cache.
- `resolve_model_path(path)`: an evr1-train run, `checkpoints/` or `step_N` folder -> its newest `actor/` model; a
  verl checkpoint folder -> its newest `global_step_N/huggingface`; anything else as it is.
- `explain_load_error(path, key, exc)`: a load that failed anyway, in one line.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from evr1_cache.train_settings import TRAIN_SETTINGS_FILE

__all__ = ["ModelPathError", "check_model_path", "explain_load_error", "looks_local", "resolve_model_path"]

#: `org/name`, or a legacy id without an organisation (`gpt2`).
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class ModelPathError(ValueError, FileNotFoundError):
    """A model path that is neither a model folder nor a usable Hub id; the message names the setting and the fix."""


def offline() -> bool:
    """Whether the Hugging Face Hub must not be asked (`HF_HUB_OFFLINE` or `TRANSFORMERS_OFFLINE`)."""
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def looks_local(path: str) -> bool:
    """A string no Hub id can be (see the module docstring)."""
    return (
        path.startswith(("/", "./", "../", "~", ".\\"))
        or "\\" in path
        or path.count("/") > 1
        or not _HUB_ID.match(path)
    )


def check_model_path(path: str, key: str, *, adapter_ok: bool = False) -> str:
    """`path` as a loader should get it (a user's `~` expanded), or `ModelPathError` naming `key` (see the module
    docstring). `adapter_ok`: a LoRA adapter folder (`adapter_config.json`) is accepted too."""
    if not path:
        raise ModelPathError(f"{key} is empty: give a Hugging Face model folder or a Hub id ({key}=PATH)")
    local = Path(path).expanduser()
    if local.is_dir():
        if (local / "config.json").is_file() or (adapter_ok and (local / "adapter_config.json").is_file()):
            return str(local)
        raise ModelPathError(f"{key}={path!r} is a folder without a config.json, not a model{_folder_hint(local, key)}")
    if local.exists():
        raise ModelPathError(f"{key}={path!r} is a file; pass the model folder (with config.json) or a Hub id")
    if looks_local(path):
        raise ModelPathError(f"{key}={path!r}: no such model folder ({local.absolute()}); check the path")
    if offline() and not _in_hub_cache(path):
        raise ModelPathError(
            f"{key}={path!r}: no such model folder ({local.absolute()}) and, with HF_HUB_OFFLINE set, not a Hugging "
            "Face Hub id in the local cache either"
        )
    return path


def _folder_hint(folder: Path, key: str) -> str:
    if (folder / "actor" / "config.json").is_file():
        return (
            f"; it is an evr1-train checkpoint: pass {key}={folder / 'actor'}, or evaluate it as trained with "
            f"`evr1-eval run --from-train {folder}`"
        )
    if (folder / TRAIN_SETTINGS_FILE).is_file() or (folder / "checkpoints").is_dir():
        return f"; it looks like an evr1-train run folder: evaluate it with `evr1-eval run --from-train {folder}`"
    return " (a Hugging Face model folder holds config.json, the weights and the tokenizer/processor files)"


def _in_hub_cache(model: str) -> bool:
    """Whether a Hub id's config is in the local Hugging Face cache (True when that cannot be told)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return True
    try:
        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except Exception:  # not a valid repo id at all: the loader will say so
        return False


def resolve_model_path(path: str) -> str:
    """An evr1-train run folder, `checkpoints/` folder or `step_N` folder -> its newest `actor/` folder; a verl
    checkpoint folder (`latest_checkpointed_iteration.txt`, e.g. of `evr1-train sft`) -> its newest
    `global_step_N/huggingface`; anything else as it is."""
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


def explain_load_error(path: str, key: str, exc: BaseException) -> ModelPathError:
    """One line for a model that could not be loaded: a local folder that is broken, or a Hub id that failed."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)[:240]
    if Path(path).expanduser().is_dir():
        return ModelPathError(f"{key}={path!r}: the folder could not be loaded as a model: {first}")
    why = ", HF_HUB_OFFLINE is set" if offline() else ""
    return ModelPathError(
        f"{key}={path!r} is not a local folder, and loading it as a Hugging Face Hub model id failed{why}: {first}"
    )
