"""Each model family's rules against its reference implementation, over generated grids.

| family | rule | reference (called, not re-implemented) |
|---|---|---|
| Qwen (all) | frames, sizes | qwen-vl-utils (test_spec_parity.py) |
| Qwen2.5-VL | `second_per_grid_ts` | transformers `VideoMetadata.sampled_fps` as `Qwen2_5_VLProcessor` uses it |
| Qwen3-VL / 3.5 | per-patch seconds | `Qwen3VLProcessor._calculate_timestamps` |
| GLM-4.1V | frames | `Glm4vVideoProcessor.sample_frames` |
| GLM-4.1V | video / image sizes | transformers glm4v `smart_resize` |
| InternVL | frames | `InternVLVideoProcessor.sample_frames` |
| InternVL | image tiles | got_ocr2 `get_optimal_tiled_canvas` |
| every family | prompt expansion + token counts | the family's real processor on real frames (`input_ids`, grids) |

Needs torch + torchvision + transformers (the processors), so it runs in `nox -s spec_parity`, where
EVR1_SPEC_PARITY=1 turns a missing dependency into a failure; elsewhere the module is skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from evr1_cache.families import get_family
from evr1_cache.families.glm4v import glm_smart_resize
from evr1_cache.families.internvl import segment_indices, tile_grid
from evr1_cache.spec import VideoMeta, resized_hw, resized_image_hw, sample_frame_indices

ROOT = Path(__file__).resolve().parents[3]


def _need(name: str) -> ModuleType:
    if os.environ.get("EVR1_SPEC_PARITY") == "1":
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=f"family parity needs {name} (a torch env): run `nox -s spec_parity`")


torch = _need("torch")
transformers = _need("transformers")
np = _need("numpy")

TOTALS = (1, 2, 3, 5, 8, 15, 16, 17, 31, 60, 61, 99, 100, 101, 299, 300, 301, 1000, 4095, 7777, 8999, 9000)
TOTALS += (9001, 17_983, 18_000, 54_321, 108_000)
NATIVE_FPS = (0.5, 1.0, 7.5, 12.0, 23.976, 24.0, 25.0, 29.97, 30.0, 59.94, 60.0, 240.0)
TARGET_FPS = (0.25, 0.5, 1.0, 2.0, 3.0, 4.0)
SIDES = (1, 13, 14, 27, 28, 29, 56, 100, 240, 360, 481, 720, 1080, 1920, 2160)
EXTREME = ((1, 199), (1, 201), (10, 2000), (10, 2001), (38, 7680))
SHAPES = tuple(itertools.product(SIDES, SIDES)) + EXTREME + tuple((w, h) for h, w in EXTREME)


def _report(what: str, mismatches: list[Any], total: int) -> str:
    head = "\n".join(repr(m) for m in mismatches[:12])
    return f"{what}: {len(mismatches)} of {total} cases differ from the reference, first ones:\n{head}"


def _metadata(total: int, fps: float) -> Any:
    from transformers.video_utils import VideoMetadata

    # transformers' own decoders report duration = total / fps
    return VideoMetadata(total_num_frames=total, fps=fps, duration=total / fps)


def _ours(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ValueError:
        return "ValueError"


# -- GLM-4.1V ---------------------------------------------------------------------------------------------------


def test_glm_frames_match_glm4v_video_processor_on_the_grid():
    from transformers import Glm4vVideoProcessor

    proc = Glm4vVideoProcessor()
    fam = get_family("glm4v")
    mismatches, count, long_videos = [], 0, 0
    for total, native, target in itertools.product(TOTALS, NATIVE_FPS, TARGET_FPS):
        if total / native * target < 1:  # < 1 frame: transformers 5.10 returns none, 5.19 one; evr1 refuses below 2
            continue
        count += 1
        long_videos += total / native > fam.max_duration
        expected = tuple(int(i) for i in proc.sample_frames(_metadata(total, native), fps=target))
        got = sample_frame_indices(total, native, fam.video_spec(fps=target))
        if got != expected:
            mismatches.append((total, native, target, expected[:6], got[:6], len(expected), len(got)))
    assert count > 1400
    assert long_videos > 100  # the > max_duration branch is reached
    assert not mismatches, _report("GLM frames", mismatches, count)


def test_glm_sizes_match_glm4v_smart_resize_on_the_grid():
    from transformers.models.glm4v.image_processing_glm4v import smart_resize

    budgets = ((112 * 112, 28 * 28 * 2 * 30000), (56 * 56, 28 * 28 * 2 * 64), (1, 10**9), (28 * 28 * 64, 28 * 28 * 64))
    mismatches, count = [], 0
    for (h, w), n, (lo, hi) in itertools.product(SHAPES, (2, 3, 4, 16, 64, 640), budgets):
        count += 1
        try:
            expected: Any = smart_resize(n, h, w, temporal_factor=2, factor=28, min_pixels=lo, max_pixels=hi)
        except ValueError:
            expected = "ValueError"
        got = _ours(glm_smart_resize, n, h, w, 28, lo, hi)
        if got != expected:
            mismatches.append((h, w, n, lo, hi, expected, got))
    assert not mismatches, _report("GLM sizes", mismatches, count)
    # through the spec: the video budget is `total_pixels`, the image rule is t = 2
    fam = get_family("glm4v")
    assert resized_hw(720, 1280, 16, fam.video_spec(min_pixels=3136, total_pixels=28 * 28 * 2 * 300)) == smart_resize(
        16, 720, 1280, 2, 28, 3136, 28 * 28 * 2 * 300
    )
    assert resized_image_hw(720, 1280, fam.image_spec()) == smart_resize(
        2, 720, 1280, 2, 28, 112 * 112, 28 * 28 * 15000
    )


# -- InternVL ----------------------------------------------------------------------------------------------------


def test_internvl_frames_match_internvl_video_processor_on_the_grid():
    from transformers import InternVLVideoProcessor

    proc = InternVLVideoProcessor()
    mismatches, count = [], 0
    for total, n in itertools.product(TOTALS, (1, 2, 3, 4, 6, 7, 8, 10, 12, 16, 24, 31, 32, 48, 64, 100, 128)):
        count += 1
        try:
            expected: Any = tuple(int(i) for i in proc.sample_frames(_metadata(total, 30.0), num_frames=n).tolist())
        except ValueError:
            expected = "ValueError"
        got = _ours(segment_indices, total, n)
        if got != expected:
            mismatches.append((total, n, expected, got))
    assert not mismatches, _report("InternVL frames", mismatches, count)
    # fps mode without binding bounds is the processor's own fps mode
    fam = get_family("internvl")
    for total, native, target in itertools.product((300, 1000, 4095), (24.0, 29.97, 30.0), (0.5, 1.0)):
        spec = fam.video_spec(fps=target, min_frames=1, max_frames=100_000)
        expected = tuple(int(i) for i in proc.sample_frames(_metadata(total, native), fps=target).tolist())
        assert sample_frame_indices(total, native, spec) == expected, (total, native, target)


def test_internvl_tiles_match_get_optimal_tiled_canvas():
    from transformers.models.got_ocr2.image_processing_got_ocr2 import get_optimal_tiled_canvas

    mismatches, count = [], 0
    for (h, w), side, (lo, hi) in itertools.product(SHAPES, (56, 448), ((1, 12), (1, 6), (2, 40), (1, 1))):
        count += 1
        expected = tuple(get_optimal_tiled_canvas((h, w), (side, side), lo, hi))
        got = tile_grid(h, w, side, lo, hi)
        if got != expected:
            mismatches.append((h, w, side, lo, hi, expected, got))
    assert not mismatches, _report("InternVL tiles", mismatches, count)


# -- Qwen temporal metadata -------------------------------------------------------------------------------------------


def test_qwen_temporal_metadata_matches_the_processors():
    from transformers import Qwen3VLProcessor
    from transformers.video_utils import VideoMetadata

    qwen3, qwen25 = get_family("qwen3_vl"), get_family("qwen2_5_vl")
    for total, native, n in itertools.product((9, 100, 301, 7777), (7.5, 23.976, 30.0, 59.94), (2, 3, 8, 17, 64)):
        if n > total:
            continue
        spec = qwen3.video_spec(fps=None, nframes=n)
        idx = sample_frame_indices(total, native, spec) if n % 2 == 0 else tuple(range(0, total, total // n))[:n]
        meta = {"frames_indices": list(idx), "fps": native, "total_num_frames": total}
        expected = Qwen3VLProcessor._calculate_timestamps(None, list(idx), native, 2)
        assert qwen3.frame_seconds(meta) == expected
        sampled = VideoMetadata(total_num_frames=total, fps=native, frames_indices=list(idx)).sampled_fps
        assert qwen25.video_timing(meta) == {"second_per_grid_ts": [2 / sampled]}


# -- prompt expansion and token counts against the real processors ----------------------------------------------------


def _tiny_vlm() -> Any:
    name = "evr1_testenv_tiny_vlm"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "testenv" / "tiny_vlm.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


#: (family, video spec settings, image spec settings) as the tiny processors are configured.
CASES = {
    "qwen2_5_vl": (
        {"min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 16},
        {"min_pixels": 3136, "max_pixels": 28 * 28 * 64},
    ),
    "qwen3_vl": (
        {"min_pixels": 32 * 32 * 4, "max_pixels": 32 * 32 * 16},
        {"min_pixels": 4096, "max_pixels": 32 * 32 * 64},
    ),
    "qwen3_5": (
        {"min_pixels": 32 * 32 * 4, "max_pixels": 32 * 32 * 16},
        {"min_pixels": 4096, "max_pixels": 32 * 32 * 64},
    ),
    "glm4v": (
        {"min_pixels": 56 * 56, "total_pixels": 28 * 28 * 2 * 64},
        {"min_pixels": 56 * 56, "max_pixels": 2 * 28 * 28 * 64},
    ),
    "internvl": ({"size_factor": 56, "fps": None, "nframes": 5}, {"size_factor": 56}),
}
VIDEOS = ((24, 8.0, 64, 96), (61, 29.97, 120, 90), (10, 4.0, 40, 200), (300, 25.0, 48, 48))
IMAGES = ((60, 80), (300, 120), (56, 56), (17, 400))


@pytest.fixture(scope="module")
def processors() -> dict[str, Any]:
    tiny = _tiny_vlm()
    return {name: tiny.PROCESSORS[name]() for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_prompt_expansion_and_token_counts_equal_the_processors(processors, name):
    """`expand_prompt` / `video_tokens` / `image_tokens` reproduce the processor's input_ids for real inputs."""
    fam = get_family(name)
    proc = processors[name]
    tok = proc.tokenizer
    video_settings, image_settings = CASES[name]
    spec = (
        fam.video_spec(fps=2.0, min_frames=2, max_frames=8, **video_settings)
        if "nframes" not in video_settings
        else fam.video_spec(**video_settings)
    )
    ispec = fam.image_spec(**image_settings)
    rng = np.random.default_rng(0)
    checked = 0
    for (total, fps, h0, w0), (ih0, iw0) in zip(VIDEOS, IMAGES):
        idx = sample_frame_indices(total, fps, spec)
        h, w = resized_hw(h0, w0, len(idx), spec)
        ih, iw = resized_image_hw(ih0, iw0, ispec)
        meta = VideoMeta(
            total_num_frames=total, fps=fps, duration=total / fps, width=w0, height=h0, frames_indices=idx,
            video_backend="grid", resized_height=h, resized_width=w,
        )  # fmt: skip
        frames = rng.integers(0, 256, (len(idx), h, w, 3), dtype=np.uint8)
        image = rng.integers(0, 256, (ih, iw, 3), dtype=np.uint8)
        for kind in ("video", "image"):
            msgs = [{"role": "user", "content": [{"type": kind}, {"type": "text", "text": "What happens?"}]}]
            text = proc.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            if kind == "video":
                out = proc(text=[text], videos=[frames], return_tensors="pt", **fam.hf_kwargs([meta.to_hf()]))
                expanded = fam.expand_prompt(text, [(meta, h, w)])
                placeholders = fam.video_tokens(len(idx), h, w)
            else:
                out = proc(
                    text=[text], images=[image], return_tensors="pt", **fam.hf_kwargs(image_spec=ispec, images=True)
                )
                expanded = fam.expand_prompt(text, [], [(ih, iw)], ispec)
                placeholders = fam.image_tokens(ih, iw, ispec)
            ids = out["input_ids"][0].tolist()
            assert ids == tok(expanded, add_special_tokens=False)["input_ids"], (name, kind, total, fps)
            feature_ids = {tok.convert_tokens_to_ids(t) for t in fam.feature_tokens}
            assert sum(i in feature_ids for i in ids) == placeholders, (name, kind)  # the positions features fill
            if kind == "video" and "video_grid_thw" in out:
                assert tuple(out["video_grid_thw"][0].tolist()) == fam.video_grid(len(idx), h, w)
            if kind == "image" and "image_grid_thw" in out:
                assert tuple(out["image_grid_thw"][0].tolist()) == fam.image_grid(ih, iw)
            if kind == "video" and "second_per_grid_ts" in out:
                assert list(out["second_per_grid_ts"]) == pytest.approx(fam.video_timing(meta)["second_per_grid_ts"])
            checked += 1
    assert checked == 2 * len(VIDEOS)
