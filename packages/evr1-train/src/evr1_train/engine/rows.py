"""Read dataset files (JSONL, JSON array, Parquet) into plain row dicts, and order them reproducibly per epoch.

Why not `datasets`: the local engine needs rows, not Arrow tables, and a resumable order that depends only on
(seed, epoch, position) so a resumed run draws exactly the batches the uninterrupted run would have drawn.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All rows of one dataset file; a malformed line is an error naming the file and line."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(
            f"dataset file {p} does not exist; build it with `evr1-cache build` (or fix data.*_files)"
        )
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        table: list[dict[str, Any]] = pq.read_table(p).to_pylist()
        return [dict(r) for r in table]
    text = p.read_text(encoding="utf-8")
    if suffix == ".json" and text.lstrip().startswith("["):
        array = json.loads(text)
        if not all(isinstance(r, dict) for r in array):
            raise ValueError(f"{p}: a JSON dataset must be an array of objects")
        return [dict(r) for r in array]
    rows: list[dict[str, Any]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{p}:{lineno}: not valid JSON ({exc}); fix or remove that line") from None
        if not isinstance(row, dict):
            raise ValueError(f"{p}:{lineno}: each line must be a JSON object, got {type(row).__name__}")
        rows.append(row)
    return rows


def read_all(paths: Sequence[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for p in paths:
        rows += read_rows(p)
    return rows


def row_id(row: dict[str, Any], index: int) -> str:
    return str(row.get("problem_id", row.get("id", index)))


def epoch_order(n: int, seed: int, epoch: int, shuffle: bool) -> list[int]:
    """Row order of one epoch: a permutation seeded by (seed, epoch), or identity."""
    if not shuffle:
        return list(range(n))
    import numpy as np

    return [int(i) for i in np.random.default_rng([seed, epoch]).permutation(n)]
