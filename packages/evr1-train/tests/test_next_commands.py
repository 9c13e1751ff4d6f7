"""What a run prints as its next step (evr1_train.export): the evaluation commands, with the prefix the user used."""

from __future__ import annotations

import os
from pathlib import Path

from evr1_cache.atomic import atomic_json, atomic_text
from evr1_train.export import command_prefix, evaluation_commands


def test_the_prefix_is_uv_run_only_under_uv() -> None:
    assert command_prefix({"UV": "/usr/local/bin/uv"}) == "uv run "
    assert command_prefix({}) == ""


def test_the_commands_export_then_evaluate_the_run() -> None:
    export, evaluate = evaluation_commands(Path("runs/q"), "runs/q/cache", prefix="uv run ")
    assert export == "uv run evr1-train export-heldout runs/q runs/q/heldout"
    assert evaluate == (
        "uv run evr1-eval run --from-train runs/q --backend hf --benchmarks evr1_data "
        "--annotations-dir runs/q/heldout --cache-dir runs/q/cache --out runs/q/eval"
    )
    (only,) = evaluation_commands("runs/q", None, annotations="elsewhere", prefix="")
    assert only.startswith("evr1-eval run --from-train runs/q ")
    assert "--annotations-dir elsewhere --out runs/q/eval" in only


def test_atomic_writes_get_the_usual_file_mode(tmp_path: Path) -> None:
    """Not mkstemp's 0600: an exported dataset or run record is readable like any file the user writes."""
    old = os.umask(0o022)
    try:
        atomic_text(tmp_path / "a.txt", "x")
        atomic_json(tmp_path / "b.json", {"a": 1})
        os.umask(0o077)
        atomic_text(tmp_path / "c.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "c.txt").stat().st_mode & 0o777 == 0o600  # the user's own umask still rules
