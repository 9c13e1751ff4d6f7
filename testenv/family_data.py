"""Test env only: a small cached dataset per model family, built by `evr1-cache build` with the family's own spec.

Shared by the family tests of evr1-eval (HF + vLLM, parity) and evr1-train (verl dataset, local step, parity), so
every side of the parity check reads the same rows and the same cached frames. The budgets fit the tiny processors of
testenv/tiny_vlm.py (a few vision tokens per frame), so the tiny models run in seconds on a CPU.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: Every tiny checkpoint of testenv/tiny_vlm.py, in the order the family tests run them.
ALL_KINDS = ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "glm4v", "glm4v_moe", "internvl")
#: What the default test run covers: the two non-Qwen families (their own processors, prompt shapes and vLLM paths).
#: Qwen2.5-VL and Qwen3-VL are exercised by every other engine test; the full grid costs ~10 minutes on 2 cores.
DEFAULT_KINDS = ("glm4v", "internvl")


def selected_kinds() -> tuple[str, ...]:
    """The family grid of this run: `EVR1_FAMILIES=all` (or a comma list of kinds) widens the default."""
    raw = os.environ.get("EVR1_FAMILIES", "").strip()
    if not raw:
        return DEFAULT_KINDS
    if raw == "all":
        return ALL_KINDS
    kinds = tuple(k.strip() for k in raw.split(",") if k.strip())
    unknown = sorted(set(kinds) - set(ALL_KINDS))
    if unknown:
        raise ValueError(f"EVR1_FAMILIES names unknown kinds {unknown}; known: all, {', '.join(ALL_KINDS)}")
    return kinds


#: family -> (video spec settings, image spec settings) for `evr1_cache.families.get_family(f).video_spec(**...)`
SPECS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "qwen2_5_vl": (
        {"fps": 2.0, "min_frames": 2, "max_frames": 8, "min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 16},
        {"min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 16},
    ),
    "qwen3_vl": (
        {"fps": 2.0, "min_frames": 2, "max_frames": 8, "min_pixels": 32 * 32 * 4, "max_pixels": 32 * 32 * 16},
        {"min_pixels": 32 * 32 * 4, "max_pixels": 32 * 32 * 16},
    ),
    "glm4v": (
        {"fps": 2.0, "min_pixels": 56 * 56, "total_pixels": 28 * 28 * 2 * 64},
        {"min_pixels": 56 * 56, "max_pixels": 2 * 28 * 28 * 16},
    ),
    "internvl": ({"fps": None, "nframes": 4, "size_factor": 56}, {"size_factor": 56}),
}
SPECS["qwen3_5"] = SPECS["qwen3_vl"]

ROWS = [
    {
        "problem_id": "v0",
        "problem": "<video>What colour is the square?",
        "answer": "<answer>B</answer>",
        "problem_type": "multiple choice",
        "options": ["A. red", "B. green", "C. blue", "D. white"],
        "videos": ["clips/v0.mp4"],
        "data_source": "toy",
    },
    {
        "problem_id": "v1",
        "problem": "<video>Does the square move?",
        "answer": "yes",
        "problem_type": "boolean",
        "videos": ["clips/v1.mp4"],
        "data_source": "toy",
    },
    {
        "problem_id": "i2",
        "problem": "<image>How many squares?",
        "answer": "3",
        "problem_type": "numerical",
        "images": ["img/i2.png"],
        "data_source": "toy",
    },
]


def specs(family: str) -> tuple[Any, Any]:
    """(SamplingSpec, ImageSpec) of `family` for the test data."""
    from evr1_cache.families import get_family

    fam = get_family(family)
    video, image = SPECS[fam.name]
    return fam.video_spec(**video), fam.image_spec(**image)


def data_node(family: str, cache_dir: Path) -> dict[str, Any]:
    """The `data.evr1` settings that read the family's cache (what a preset would set)."""
    video, image = specs(family)
    return {"cache_dir": str(cache_dir), "video": video.to_dict(), "image": image.to_dict()}


def build_family_data(root: str | Path, family: str) -> dict[str, Path]:
    """Media (generated, shared by all families) + the family's frame cache + the dataset `evr1-cache build` wrote."""
    from evr1_cache import build_cache
    from evr1_cache.testing import make_synthetic_image, make_synthetic_video

    root = Path(root)
    media = root / "media"
    if not (media / "train.jsonl").exists():
        make_synthetic_video(media / "clips" / "v0.mp4", n_frames=24, fps=8.0, size=(96, 64))
        make_synthetic_video(media / "clips" / "v1.mp4", n_frames=30, fps=10.0, size=(64, 96))
        make_synthetic_image(media / "img" / "i2.png", size=(80, 60), index=3)
        (media / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    cache = root / f"cache-{family}"
    out = cache / "train.evr1.jsonl"
    if not out.exists():
        video, image = specs(family)
        report = build_cache(media / "train.jsonl", cache, video, image, progress=False, output_data=out)
        if not report.ok:
            raise RuntimeError(f"evr1-cache build failed for {family}: {report.errors}")
    return {"root": media, "cache": cache, "built": out}
