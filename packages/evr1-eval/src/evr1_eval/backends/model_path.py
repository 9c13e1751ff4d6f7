"""`--model` as a user types it: a local folder or a Hugging Face Hub id, checked before an engine is started.

Why: transformers and vLLM answer a mistyped folder with a long traceback about repository ids (the folder is taken
for a Hub id, then the Hub lookup fails or is offline). A user needs one line that names the path and says what to
pass instead, and an evr1-train checkpoint folder (weights one level down, in `actor/`) is recognised and named.
"""

from __future__ import annotations

import os
from pathlib import Path

from evr1_eval.backends.base import BackendError

#: What an evr1-train checkpoint (or run) folder holds beside the model folder.
TRAIN_PROTOCOL_FILE = "evr1_train_protocol.json"


def looks_local(model: str) -> bool:
    """A string no Hub id can be: absolute, `./`, `../`, `~`, a backslash, or more than one `/`."""
    return (
        model.startswith(("/", "./", "../", "~", ".\\"))
        or "\\" in model
        or model.count("/") > 1
        or model in (".", "..")
    )


def check_model_path(model: str, backend: str) -> str:
    """`model` as the engine should get it (a user's `~` expanded); raises `BackendError` with one line when a local
    path is missing or is not a model folder. A string that is not a local path is passed on as a Hub id."""
    path = Path(model).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return str(path)
        hint = ""
        if (path / "actor" / "config.json").is_file():
            hint = f"; it is an evr1-train checkpoint: pass --model {path / 'actor'} or --from-train {path}"
        elif (path / TRAIN_PROTOCOL_FILE).is_file() or (path / "checkpoints").is_dir():
            hint = f"; it looks like an evr1-train run folder: pass --from-train {path}"
        raise BackendError(f"{backend} backend: --model {model} is a folder without a config.json (not a model){hint}")
    if path.exists():
        raise BackendError(f"{backend} backend: --model {model} is a file; pass the model folder (with config.json)")
    if looks_local(model):
        raise BackendError(f"{backend} backend: --model {model}: no such folder ({path.absolute()})")
    if _offline() and not _in_hub_cache(model):
        raise BackendError(
            f"{backend} backend: --model {model} is no local folder ({path.absolute()}) and, with HF_HUB_OFFLINE "
            "set, not a Hugging Face Hub id in the local cache either"
        )
    return model


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def _in_hub_cache(model: str) -> bool:
    """Whether a Hub id's config is in the local Hugging Face cache (True when that cannot be told)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return True
    try:
        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except Exception:  # not a valid repo id at all: transformers will say so when it loads
        return False


def load_error(backend: str, model: str, exc: BaseException) -> BackendError:
    """One line for a model that could not be loaded: a local folder that is broken, or a Hub id that failed."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)[:240]
    path = Path(model).expanduser()
    if path.exists():
        return BackendError(f"{backend} backend: cannot load the model in {model}: {first}")
    offline = ", HF_HUB_OFFLINE is set" if _offline() else ""
    return BackendError(
        f"{backend} backend: --model {model} is no local folder ({path.absolute()}) and did not load as a Hugging "
        f"Face Hub id{offline}: {first}"
    )
