"""Prepare everything the quickstart trains on: generated data -> frame cache (evr1-cache) -> tiny model.

Why a separate step: `evr1-train` with no arguments must work on a fresh machine, so the inputs a real run would be
given (dataset files from `evr1-cache build`, a model folder) are produced here, once, under the run folder, and
reused on the next run (each stage is resumable and checks that its settings did not change).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evr1_train.quickstart.dataset import SPLITS, QuickstartDataSpec, generate_quickstart_data
from evr1_train.quickstart.model import TinyVLMSpec, save_tiny_vlm

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedQuickstart:
    """Paths the engine config is pointed at."""

    train_file: Path
    val_file: Path
    cache_dir: Path
    media_root: Path
    model_dir: Path | None  # None when the run starts from another model (e.g. RL from an SFT checkpoint)


def corpus_from(files: dict[str, Path]) -> list[str]:
    """Prompt and answer texts of the generated rows: the tiny tokenizer is trained on them (short prompts)."""
    from evr1_cache import read_rows
    from evr1_train.data import DataOptions, build_prompt_text

    opts = DataOptions(video_source="decode", think=False)
    texts: list[str] = []
    for row in read_rows(*files.values()):
        texts.append(build_prompt_text(row, opts))
        texts.append(str(row.get("offline_output") or ""))
    return texts


def prepare_quickstart(
    root: str | os.PathLike[str],
    data: QuickstartDataSpec,
    model: TinyVLMSpec,
    video: dict[str, Any],
    image: dict[str, Any],
    *,
    progress: bool = True,
    build_model: bool = True,
    extra_corpus: tuple[str, ...] = (),
) -> PreparedQuickstart:
    """Generate data, build the frame cache with `evr1_cache.build_cache`, and (unless `build_model` is false)
    build the tiny model, under `root`. `extra_corpus`: more text every prompt holds (the agent's tool
    instructions), so the tiny tokenizer learns it as a few dozen tokens."""
    from evr1_cache import ImageSpec, SamplingSpec, build_cache

    root = Path(root)
    data_dir = root / "data"
    cache_dir = root / "cache"
    raw = generate_quickstart_data(data_dir, data, progress=progress)
    built: dict[str, Path] = {}
    for split in SPLITS:
        target = data_dir / f"{split}.evr1.jsonl"
        report = build_cache(
            raw[split],
            cache_dir,
            SamplingSpec(**video),
            ImageSpec(**image),
            progress=progress,
            output_data=target,  # beside the raw rows, so their relative media paths still resolve
        )
        if not report.ok:
            logger.warning("quickstart cache: %d media failed: %s", report.failed, "; ".join(report.errors[:3]))
        built[split] = target
    model_dir = (
        save_tiny_vlm(root / "model-init", model, corpus_from(raw) + list(extra_corpus) * 50) if build_model else None
    )
    return PreparedQuickstart(built["train"], built["heldout"], cache_dir, data_dir, model_dir)
