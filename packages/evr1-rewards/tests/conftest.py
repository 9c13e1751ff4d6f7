"""Shared fixtures: test inputs and builders from the repository's `testenv/` (test-only code that ships in no
package), loaded by file path so no test touches `sys.path`."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

TESTENV = Path(__file__).resolve().parents[3] / "testenv"


def load_testenv(name: str) -> ModuleType:
    """`testenv/<name>.py` as a module (cached in pytest's process by its path-derived name)."""
    import sys

    mod_name = f"evr1_testenv_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, TESTENV / f"{name}.py")
    assert spec is not None, f"testenv/{name}.py is missing"
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def rewards_inputs() -> ModuleType:
    """`testenv/rewards_inputs.py`: typical and adversarial responses per problem type."""
    return load_testenv("rewards_inputs")


@pytest.fixture(scope="session")
def testenv():  # type: ignore[no-untyped-def]
    """`testenv("name")` loads `testenv/name.py`."""
    return load_testenv
