"""Helper modules of these tests, loaded by path (the tests run with `--import-mode=importlib`, no sys.path edits):
the differential-test corpora and the lmms-eval loader."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).parent


def _load(name: str) -> None:
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


for _name in ("diff_corpus", "diff_corpus_heldout", "lmms_reference"):
    _load(_name)
