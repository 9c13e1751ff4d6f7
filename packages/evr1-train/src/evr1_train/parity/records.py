"""What one engine side fed the model for one sample, and its pickle-free file format (safetensors + JSON header).

Why a file: verl and vLLM pin different transformers versions, so on a CPU test machine (and on some clusters) the
three sides run in different environments; each side dumps its records and `evr1-train parity --compare` reads them
back. Tensors go into safetensors, everything else into the JSON string of its header; nothing is ever unpickled.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

FORMAT = "evr1-parity/2"
SIDES = ("verl", "hf", "vllm")


@dataclass(frozen=True)
class SideRecord:
    """One sample as one side prepared it.

    prompt_ids: the prompt's token ids with every vision placeholder expanded.
    placeholder_ids: the token ids this side fills with vision features (vLLM's InternVL uses `<video>` where
        transformers uses `<IMG_CONTEXT>`: the positions must agree, the ids may differ).
    grids: `image_grid_thw` / `video_grid_thw` rows (empty for families without grids).
    timing: the temporal metadata the model gets (`second_per_grid_ts`, or the seconds written into the prompt).
    pixels: the processor's float pixel tensors by name (`pixel_values`, `pixel_values_videos`).
    response_ids / logprobs: a fixed response's tokens and log p(token | prefix) under this side's forward.
    info: engine, versions, dtype, model and the identity of the inputs (frames digest).
    """

    sample: str
    side: str
    family: str
    prompt_ids: tuple[int, ...]
    placeholder_ids: tuple[int, ...]
    grids: dict[str, list[list[int]]] = field(default_factory=dict)
    timing: dict[str, list[float]] = field(default_factory=dict)
    pixels: dict[str, Any] = field(default_factory=dict)
    response_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    info: dict[str, str] = field(default_factory=dict)

    def header(self) -> dict[str, Any]:
        """Every field but the tensors' values (pixels by name; log-probs are stored as a tensor), JSON-ready."""
        return {
            f.name: sorted(self.pixels) if f.name == "pixels" else getattr(self, f.name)
            for f in fields(self)
            if f.name != "logprobs"
        }


def write_dump(path: str | os.PathLike[str], records: list[SideRecord]) -> Path:
    """Write `records` to one safetensors file atomically: pixels as `<i>/<name>` float32, log-probs as
    `<i>/_logprobs` float64 (an engine's NaN / inf must reach the comparison, not break JSON), the rest in the header."""
    import numpy as np
    from safetensors.numpy import save_file

    from evr1_cache.atomic import atomic_path

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, Any] = {}
    for i, rec in enumerate(records):
        for name, value in rec.pixels.items():
            tensors[f"{i}/{name}"] = np.ascontiguousarray(np.asarray(value, dtype=np.float32))
        if rec.logprobs:
            tensors[f"{i}/_logprobs"] = np.asarray(rec.logprobs, dtype=np.float64)
    if not tensors:  # safetensors needs at least one tensor
        tensors["_empty"] = np.zeros(1, np.float32)
    meta = {"format": FORMAT, "records": json.dumps([r.header() for r in records], allow_nan=False)}
    with atomic_path(out) as tmp:
        save_file(tensors, str(tmp), metadata=meta)
    return out


def read_dump(path: str | os.PathLike[str]) -> list[SideRecord]:
    """Records written by `write_dump`; anything else is refused with the file's name."""
    from safetensors import safe_open

    p = Path(path)
    try:
        with safe_open(str(p), framework="numpy") as fh:
            meta = fh.metadata() or {}
            if meta.get("format") != FORMAT:
                raise ValueError(f"{p}: not an evr1 parity dump (format {meta.get('format')!r}, want {FORMAT!r})")
            heads = json.loads(meta["records"])
            stored = set(fh.keys())
            records = []
            for i, head in enumerate(heads):
                pixels = {name: fh.get_tensor(f"{i}/{name}") for name in head.pop("pixels")}
                lp_key = f"{i}/_logprobs"
                logprobs = tuple(float(v) for v in fh.get_tensor(lp_key)) if lp_key in stored else ()
                ids = {k: tuple(head[k]) for k in ("prompt_ids", "placeholder_ids", "response_ids")}
                records.append(SideRecord(**{**head, **ids, "logprobs": logprobs, "pixels": pixels}))
    except (OSError, KeyError, json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"{p}: unreadable parity dump ({type(exc).__name__}: {exc}); re-run that side") from exc
    return records
