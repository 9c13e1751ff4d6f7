"""`pip install evr1-rewards` alone: importing the package and every module it ships loads only the standard library
(optional extras such as math-verify and tqdm are imported lazily, inside the functions that need them)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import importlib, json, pkgutil, sys
before = set(sys.modules)
import evr1_rewards
mods = [m.name for m in pkgutil.walk_packages(evr1_rewards.__path__, "evr1_rewards.")]
for name in mods:
    importlib.import_module(name)
loaded = {m.split(".")[0] for m in set(sys.modules) - before}
print(json.dumps({"modules": mods, "foreign": sorted(loaded - set(sys.stdlib_module_names) - {"evr1_rewards"})}))
"""


def test_every_module_imports_with_the_standard_library_only() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    data = json.loads(out.stdout)
    assert "evr1_rewards.integrations.verl" in data["modules"]
    assert "evr1_rewards.scorers.code" in data["modules"]
    assert data["foreign"] == []
