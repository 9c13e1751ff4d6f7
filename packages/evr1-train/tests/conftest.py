"""Fixtures shared by evr1-train's tests: a small video/image dataset with its frame cache, and a tiny Qwen2.5-VL.

Both are built once per session from the packages' own helpers (evr1_cache.testing, evr1_train.quickstart.model);
so are the shortened quickstart's inputs (generated clips, their frame cache, the tiny model) that the local-engine
tests train on (`quickstart_cfg`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: Video/image budget of the test data: 56x56 frames (one 2x2 merge of 28-px patches), 2 fps.
VIDEO = {
    "fps": 2.0,
    "min_frames": 2,
    "max_frames": 8,
    "min_pixels": 3136,
    "max_pixels": 3136,
    "total_pixels": None,
    "nframes": None,
    "size_factor": 28,
}
IMAGE = {"min_pixels": 3136, "max_pixels": 12544, "size_factor": 28}  # independent of (larger than) VIDEO


def _rows() -> list[dict[str, Any]]:
    mc = ["A. red", "B. green", "C. blue", "D. white"]
    return [
        {
            "problem_id": "v0",
            "problem": "<video>What colour is the square?",
            "answer": "<answer>B</answer>",
            "problem_type": "multiple choice",
            "data_type": "video",
            "options": mc,
            "videos": ["clips/v0.mp4"],
            "offline_output": "<think>the square is green</think><answer>B</answer>",
            "has_offline_trajectory": True,
            "data_source": "toy",
        },
        {
            "problem_id": "i1",
            "problem": "How many squares?",
            "answer": "3",
            "problem_type": "numerical",
            "data_type": "image",
            "images": ["img/i1.png"],
            "data_source": "toy",
        },
        {
            "problem_id": "iv2",
            "problem": "Does the <image> appear in the <video>?",
            "answer": "yes",
            "problem_type": "boolean",
            "data_type": "video",
            "images": ["img/i1.png"],
            "videos": ["clips/v0.mp4"],
            "data_source": "toy",
        },
        {
            "problem_id": "vv3",
            "problem": "Which clip is longer, the first or the second?",
            "answer": "<answer>A</answer>",
            "problem_type": "multiple choice",
            "options": ["A. first", "B. second"],
            "videos": ["clips/v0.mp4", "clips/v1.mp4"],
            "data_source": "toy",
        },
        {
            "problem_id": "t4",
            "problem": "What is 2+2?",
            "answer": "4",
            "problem_type": "numerical",
            "data_source": "toy",
        },
    ]


@pytest.fixture(scope="session")
def video_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Raw dataset (JSONL + media), its frame cache, and the dataset file written by `evr1-cache build`."""
    from evr1_cache import ImageSpec, SamplingSpec, build_cache
    from evr1_cache.testing import make_synthetic_image, make_synthetic_video

    root = tmp_path_factory.mktemp("train_data")
    make_synthetic_video(root / "clips" / "v0.mp4", n_frames=24, fps=8.0, size=(96, 64))
    make_synthetic_video(root / "clips" / "v1.mp4", n_frames=40, fps=10.0, size=(64, 96))
    make_synthetic_image(root / "img" / "i1.png", size=(80, 60), index=3)
    raw = root / "train.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    cache = root / "cache"
    report = build_cache(raw, cache, SamplingSpec(**VIDEO), ImageSpec(**IMAGE), progress=False)
    assert report.ok, report.errors
    return {"root": root, "raw": raw, "cache": cache, "built": Path(report.output_data)}


@pytest.fixture(scope="session")
def tiny_vl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2.5-VL checkpoint (model, tokenizer, processor with a 56x56 budget)."""
    from evr1_train.quickstart.model import TinyVLMSpec, save_tiny_vlm

    return save_tiny_vlm(tmp_path_factory.mktemp("models") / "tiny_qwen2_5_vl", TinyVLMSpec(arch="qwen2_5_vl"))


@pytest.fixture(scope="session")
def budgets() -> tuple[dict[str, Any], dict[str, Any]]:
    """(video, image) budget settings the test cache was built with."""
    return dict(VIDEO), dict(IMAGE)


@pytest.fixture(scope="session")
def make_opts(video_data: dict[str, Path]) -> Any:
    """`make_opts(**overrides)` -> DataOptions for the test data (cache dir, budgets, media root preset)."""
    from evr1_train.data import DataOptions

    def make(**kw: Any) -> Any:
        base = {
            "cache_dir": str(video_data["cache"]),
            "video": VIDEO,
            "image": IMAGE,
            "media_root": str(video_data["root"]),
        }
        return DataOptions.from_mapping({**base, **kw})

    return make


#: The quickstart shortened for tests: 48 training / 24 held-out rows, batches of 8.
SMALL_QUICKSTART = [
    "engine.quickstart.data.n_train=48",
    "engine.quickstart.data.n_heldout=24",
    "engine.quickstart.progress=false",
    "engine.num_threads=1",
    "engine.loggers=[jsonl]",
    "data.train_batch_size=8",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
    "evr1.rollout_dump.write_viewer=false",  # the quickstart's viewer is built by one test only (rollout dumps)
]


def compose_quickstart(out: Path, *overrides: str, experiment: str = "quickstart") -> Any:
    """A shortened quickstart config (any `experiment=quickstart*` preset) writing to `out`."""
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        return compose(
            "evr1_trainer",
            overrides=[f"+experiment={experiment}", f"engine.output_dir={out}", *SMALL_QUICKSTART, *overrides],
        )


@pytest.fixture(scope="session")
def quickstart_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Quickstart inputs (data, cache, tiny model) built once; runs point their output folders elsewhere."""
    from evr1_train.engine.local import prepare_inputs

    root = tmp_path_factory.mktemp("quickstart")
    prepare_inputs(compose_quickstart(root))
    return root


@pytest.fixture(scope="session")
def quickstart_cfg(quickstart_inputs: Path) -> Any:
    """`quickstart_cfg(out, *overrides, experiment=...)`: a config reading the prepared inputs, writing to `out`."""

    def make(out: Path, *overrides: str, experiment: str = "quickstart") -> Any:
        from omegaconf import OmegaConf

        cfg = compose_quickstart(quickstart_inputs, *overrides, experiment=experiment)
        OmegaConf.resolve(cfg)  # keep the data/model paths of the prepared inputs when the output folder moves
        cfg.engine.output_dir = str(out)
        cfg.engine.quickstart.enable = False
        return cfg

    return make


@pytest.fixture(scope="session")
def quickstart_compose() -> Any:
    """`compose_quickstart` for tests that build their own inputs."""
    return compose_quickstart


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """One torch thread for a module (`pytestmark = pytest.mark.usefixtures("one_thread")`): an OpenMP pool started
    there would deadlock the forked dataset workers of later verl tests."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
