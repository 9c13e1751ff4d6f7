"""Import lmms-eval's real task files (`lmms_eval/tasks/<task>/utils.py`) without its task registry or engines.

lmms-eval is installed with `--no-deps` plus what its scoring code uses (loguru, pyyaml, numpy, pandas, filelock):
`nox -s eval_lmms`. The task files' top-level imports that scoring never touches are stubbed, and only those:

- `lmms_eval.tasks` (its `__init__` builds the task registry, importing torch/datasets/transformers): a bare package
  pointing at the real folder, so `lmms_eval.tasks.<task>.utils` and `_task_utils.*` load from the real files;
- `lmms_eval.utils` (imports torch, transformers): a module with the two names the task files take from it;
- torch, decord, cv2, datasets and requests: placeholder modules (video decoding, dataset loading, HTTP).

Network judges are cut at their entry points by the tests (`_get_pipeline` / `requests.post` raise), which is what
the reference code does without an API key: its documented no-judge path.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any


class _Placeholder:
    """Any attribute of a stubbed module: callable, subscriptable, usable as a base class or annotation."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a stubbed module was called: scoring code must not reach it")

    def __getattr__(self, name: str) -> Any:
        return _Placeholder()


def _stub(name: str) -> None:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__getattr__ = lambda attr: _Placeholder  # type: ignore[method-assign]
    sys.modules[name] = module


def prepare() -> Path:
    """Install the stubs once; returns the real `lmms_eval/tasks` folder."""
    import lmms_eval

    root = Path(lmms_eval.__file__).parent
    os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="lmms-hf-home-"))  # read at import by some tasks
    if "lmms_eval.tasks" not in sys.modules:
        tasks = types.ModuleType("lmms_eval.tasks")
        tasks.__path__ = [str(root / "tasks")]
        sys.modules["lmms_eval.tasks"] = tasks
    if "lmms_eval.utils" not in sys.modules:
        from loguru import logger

        utils = types.ModuleType("lmms_eval.utils")
        utils.eval_logger = logger  # type: ignore[attr-defined]
        utils.resolve_cache_dir = lambda path, base_dir=None: str(path)  # type: ignore[attr-defined]
        sys.modules["lmms_eval.utils"] = utils
    for name in ("datasets", "requests", "cv2", "decord", "torch"):  # real ones first: datasets probes for torch
        try:
            importlib.import_module(name)
        except ImportError:
            _stub(name)
    return root / "tasks"


def task(name: str) -> Any:
    """`lmms_eval.tasks.<name>.utils`, imported from the installed release."""
    prepare()
    return importlib.import_module(f"lmms_eval.tasks.{name}.utils")


def module(dotted: str) -> Any:
    prepare()
    return importlib.import_module(dotted)


def strip_reasoning_tags(text: str) -> str:
    """lmms-eval's scoring loop with the CLI's default `--reasoning_tags`: what every `process_results` receives."""
    reasoning = module("lmms_eval.api.reasoning")
    return str(reasoning.strip_reasoning_tags(text, [["<think>", "</think>"], ["<analysis>", "</analysis>"]]))


def version() -> str:
    from importlib import metadata

    return metadata.version("lmms-eval")
