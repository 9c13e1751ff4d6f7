"""The import-cycle check of `nox -s imports` (testenv/import_cycles.py): it fails on a planted cycle, lazy or not,
ignores TYPE_CHECKING-only imports, and finds none in the four packages."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("grimp", reason="import-linter's graph library (the dev venv and `nox -s imports` have it)")

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "testenv" / "import_cycles.py"


def _run(*packages: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(CHECK), *packages], capture_output=True, text=True, env=env, check=False)


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    return root


def test_a_lazy_cycle_fails_and_is_printed(tmp_path: Path) -> None:
    _package(
        tmp_path,
        {
            "knot/__init__.py": "",
            "knot/spec.py": "def size(name):\n    from knot.plugins import lookup  # lazy: still a cycle\n    return lookup(name)\n",
            "knot/plugins.py": "from knot.spec import size\n\ndef lookup(name):\n    return name\n",
            "knot/leaf.py": "import knot.spec\n",
        },
    )
    done = _run("knot", path=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "import cycle: knot.plugins (line 1) -> knot.spec (line 2) -> knot.plugins" in done.stdout
    assert "1 import cycle(s) in knot" in done.stdout
    assert "knot.leaf" not in done.stdout.splitlines()[0]


def test_a_cycle_through_a_package_init_is_found(tmp_path: Path) -> None:
    _package(
        tmp_path,
        {
            "reg/__init__.py": "def load():\n    from reg import backend\n",
            "reg/backend.py": "from reg import load\n",
        },
    )
    done = _run("reg", path=tmp_path)
    assert done.returncode == 1
    assert "reg -> " not in done.stdout  # every hop names its line
    assert "reg (line 2) -> reg.backend (line 1) -> reg" in done.stdout


def test_type_checking_imports_are_not_cycles(tmp_path: Path) -> None:
    _package(
        tmp_path,
        {
            "calm/__init__.py": "",
            "calm/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from calm.b import B\n",
            "calm/b.py": "import calm.a\nclass B: ...\n",
        },
    )
    done = _run("calm", path=tmp_path)
    assert done.returncode == 0, done.stdout
    assert "0 import cycle(s) in calm" in done.stdout


def test_the_workspace_has_no_import_cycle() -> None:
    done = _run("evr1_cache", "evr1_rewards", "evr1_eval", "evr1_train")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 import cycle(s)" in done.stdout
