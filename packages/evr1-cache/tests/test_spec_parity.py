"""evr1_cache.spec against the real qwen-vl-utils 0.0.14 (and transformers) over generated grids.

Needs torch + torchvision + qwen-vl-utils + transformers, so it runs in `nox -s spec_parity` (a pip venv with the CPU
torch), where EVR1_SPEC_PARITY=1 turns a missing dependency into a failure; elsewhere the module is skipped.

Only I/O is replaced in the library: `torchvision.io.read_video` returns a stride-0 tensor with the requested frame
count, and the final pixel resize records the size it was asked for. Frame counts, indices, pixel budgets and
`smart_resize` all run as the library's own code.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Iterator
from typing import Any

import pytest

from evr1_cache.spec import ImageSpec, SamplingSpec, VideoMeta, resized_hw, resized_image_hw, sample_frame_indices
from evr1_cache.testing import reference_module

torch = reference_module("torch")
vp = reference_module("qwen_vl_utils.vision_process")

# -- the grids (generated; their sizes are asserted below) ------------------------------------------------------------

#: Frame counts: tiny, odd, powers of two +-1, common clip lengths, hour-long and multi-hour videos.
TOTALS = (1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 64, 99, 100, 101, 127, 250, 299, 301, 1000, 1001, 4095, 7777)
TOTALS += (18_000, 54_321, 108_000, 299_999, 1_000_003, 5_000_000)
#: Native rates below and above every target, NTSC fractions included.
NATIVE_FPS = (0.5, 1.0, 7.5, 12.0, 23.976, 24.0, 25.0, 29.97, 30.0, 59.94, 60.0, 240.0)
TARGET_FPS = (0.25, 1.0, 2.0, 4.0, 30.0)
#: (min_frames, max_frames): Qwen's default, odd bounds (rounded up/down to the frame factor), tight and huge.
FRAME_BOUNDS = ((4, 768), (1, 2), (3, 17), (16, 64), (5, 2048))
FIXED_NFRAMES = (2, 3, 4, 5, 7, 16, 31, 64, 255, 768)
INDEX_GRID_SIZE = len(TOTALS) * (len(NATIVE_FPS) * len(TARGET_FPS) * len(FRAME_BOUNDS) + len(FIXED_NFRAMES))

#: Frame sides: below / at / just above both factors, common video sizes, 4K and 8K.
SIDES = (1, 2, 13, 14, 27, 28, 29, 32, 33, 100, 240, 360, 481, 720, 1080, 1920, 2160, 4320)
#: Extreme aspect ratios around the 200:1 limit (both orientations are added).
EXTREME = ((1, 199), (1, 200), (1, 201), (3, 600), (3, 601), (10, 2000), (10, 2001), (38, 7680), (39, 7680))
EXTREME += ((40, 8000), (40, 8001))
SHAPES = tuple(itertools.product(SIDES, SIDES)) + EXTREME + tuple((w, h) for h, w in EXTREME)
VIDEO_NFRAMES = (2, 4, 16, 64, 256, 768)
FACTORS = (28, 32)


def video_budgets(f: int) -> tuple[dict[str, int], ...]:
    """(min_pixels, max_pixels, total_pixels) settings; an absent key means the library's default."""
    return (
        {},  # all defaults: 128..768 tokens per frame, total = 90% of MODEL_SEQ_LEN
        {"min_pixels": 64 * f * f, "max_pixels": 256 * f * f},
        {"min_pixels": 128 * f * f, "max_pixels": 768 * f * f, "total_pixels": 4096 * f * f},  # total budget binds
        {"min_pixels": 16 * f * f, "max_pixels": 16384 * f * f, "total_pixels": 24576 * f * f},  # max above the cap
        {"min_pixels": 1024 * f * f, "max_pixels": 1024 * f * f, "total_pixels": 1000 * f * f},  # 1.05 floor binds
        {"min_pixels": 1, "max_pixels": 10**8, "total_pixels": 10**7},  # not multiples of anything
    )


def image_budgets(f: int) -> tuple[dict[str, int], ...]:
    return (
        {},  # fetch_image defaults: 4..16384 tokens
        {"min_pixels": 4 * f * f, "max_pixels": 1280 * f * f},
        {"min_pixels": 256 * 28 * 28, "max_pixels": 256 * 28 * 28},
        {"min_pixels": 1, "max_pixels": 10**9},
    )


RESIZE_GRID_SIZE = len(SHAPES) * len(VIDEO_NFRAMES) * len(FACTORS) * len(video_budgets(28))
IMAGE_GRID_SIZE = len(SHAPES) * len(FACTORS) * len(image_budgets(28))
COMPOSED_GRID_SIZE = 1500


def test_grid_sizes():
    assert (INDEX_GRID_SIZE, RESIZE_GRID_SIZE, IMAGE_GRID_SIZE) == (9300, 24912, 2768)
    assert INDEX_GRID_SIZE + RESIZE_GRID_SIZE + IMAGE_GRID_SIZE + COMPOSED_GRID_SIZE >= 10_000


# -- driving the library ----------------------------------------------------------------------------------------------


class FakeSource:
    """What the patched `read_video` returns: `total` frames at `fps`, each 1x1 (a stride-0 view, no memory)."""

    total = 1
    fps = 30.0


@pytest.fixture
def library(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Patch qwen-vl-utils' I/O only; yields a dict that collects the size passed to the final resize."""
    if vp.MODEL_SEQ_LEN != 128000:
        pytest.fail(
            f"MODEL_SEQ_LEN={vp.MODEL_SEQ_LEN} in the environment changes qwen-vl-utils' default budget; unset it"
        )
    logging.getLogger(vp.__name__).setLevel(logging.ERROR)
    seen: dict[str, Any] = {}

    def read_video(path: str, **_: Any) -> tuple[Any, None, dict[str, float]]:
        return (
            torch.zeros((1, 1, 1, 1), dtype=torch.uint8).expand(FakeSource.total, 1, 1, 1),
            None,
            {"video_fps": FakeSource.fps},
        )

    def resize(video: Any, size: list[int], **_: Any) -> Any:
        seen["size"] = (int(size[0]), int(size[1]))
        return torch.zeros(1)

    monkeypatch.setattr(vp.io, "read_video", read_video, raising=False)
    monkeypatch.setattr(vp.transforms.functional, "resize", resize)
    monkeypatch.setattr(vp, "get_video_reader_backend", lambda: "evr1-grid")
    return seen


def lib_indices(total: int, native_fps: float, ele: dict[str, Any]) -> tuple[int, ...] | str:
    FakeSource.total, FakeSource.fps = total, native_fps
    try:
        _, meta, _ = vp._read_video_torchvision({"video": "grid.mp4", **ele})
    except ValueError:
        return "ValueError"
    return tuple(int(i) for i in meta["frames_indices"].tolist())


def lib_video_hw(seen: dict[str, Any], h: int, w: int, n: int, f: int, budget: dict[str, int]) -> tuple[int, int] | str:
    frames = torch.zeros((1, 1, 1, 1), dtype=torch.uint8).expand(n, 3, h, w)

    def reader(ele: dict[str, Any]) -> tuple[Any, dict[str, Any], float]:
        return frames, {"fps": 30.0, "frames_indices": list(range(n)), "total_num_frames": n}, 2.0

    vp.VIDEO_READER_BACKENDS["evr1-grid"] = reader
    try:
        vp.fetch_video({"video": "grid.mp4", **budget}, image_patch_size=f // 2)
    except ValueError:
        return "ValueError"
    finally:
        del vp.VIDEO_READER_BACKENDS["evr1-grid"]
    got = seen.pop("size")
    return "ValueError" if 0 in got else got  # a 0-pixel side cannot be resized: the library fails right after


def ours(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ValueError:
        return "ValueError"


def spec_from(ele: dict[str, Any], f: int = 28) -> SamplingSpec:
    if "nframes" in ele:
        return SamplingSpec(fps=None, nframes=ele["nframes"], size_factor=f, **_budget_only(ele))
    return SamplingSpec(
        fps=ele["fps"], min_frames=ele["min_frames"], max_frames=ele["max_frames"], size_factor=f, **_budget_only(ele)
    )


def _budget_only(ele: dict[str, Any]) -> dict[str, Any]:
    return {k: ele[k] for k in ("min_pixels", "max_pixels", "total_pixels") if k in ele}


def _report(mismatches: list[tuple[Any, ...]], total: int) -> str:
    head = "\n".join(repr(m) for m in mismatches[:15])
    return f"{len(mismatches)} of {total} cases differ from qwen-vl-utils, first ones:\n{head}"


# -- frame counts and indices -----------------------------------------------------------------------------------------


def index_cases() -> Iterator[tuple[int, float, dict[str, Any]]]:
    for total in TOTALS:
        for native, target, (lo, hi) in itertools.product(NATIVE_FPS, TARGET_FPS, FRAME_BOUNDS):
            yield total, native, {"fps": target, "min_frames": lo, "max_frames": hi}
        for nframes in FIXED_NFRAMES:
            yield total, 30.0, {"nframes": nframes}


def test_frame_indices_match_qwen_vl_utils_on_the_grid(library):
    capability = torch.backends.cpu.get_cpu_capability()
    if capability == "DEFAULT":
        pytest.skip("this torch runs its non-SIMD kernels, whose linspace rounds twice; the spec follows AVX2/AVX-512")
    mismatches, count, errors = [], 0, 0
    for total, native, ele in index_cases():
        count += 1
        expected = lib_indices(total, native, ele)
        got = ours(sample_frame_indices, total, native, spec_from(ele))
        errors += expected == "ValueError"
        if got != expected:
            mismatches.append((total, native, ele, _short(expected), _short(got)))
    assert count == INDEX_GRID_SIZE
    assert 0 < errors < count  # the grid reaches both outcomes
    assert not mismatches, _report(mismatches, count)


def _short(x: Any) -> Any:
    """Long index tuples as (length, sum, head, tail), so a failure report stays readable."""
    return x if isinstance(x, str) or len(x) < 12 else (len(x), sum(x), x[:4], x[-4:])


def test_default_max_frames_is_equivalent_to_an_explicit_768(library):
    # The library's default max_frames is min(768, total); the spec stores 768 and clamps to total later.
    for total, native in itertools.product(TOTALS, NATIVE_FPS):
        expected = lib_indices(total, native, {"fps": 2.0})
        assert ours(sample_frame_indices, total, native, SamplingSpec(fps=2.0)) == expected, (total, native)


def test_float32_rounding_matters_and_is_reproduced(library):
    # Guard against a "simplification" to exact rational rounding: on long videos torch's float32 linspace picks
    # different frames, and the spec must pick the library's.
    differing = 0
    for total in (54_321, 108_000, 299_999, 1_000_003, 5_000_000):
        for n in (64, 256, 768):
            exact = tuple(round(i * (total - 1) / (n - 1)) for i in range(n))
            expected = lib_indices(total, 30.0, {"nframes": n})
            assert sample_frame_indices(total, 30.0, SamplingSpec(fps=None, nframes=n)) == expected
            differing += exact != expected
    assert differing > 0


# -- pixel budget and resize ------------------------------------------------------------------------------------------


def test_video_frame_sizes_match_fetch_video_on_the_grid(library):
    mismatches, count, errors = [], 0, 0
    for f in FACTORS:
        for budget in video_budgets(f):
            spec = SamplingSpec(size_factor=f, **budget)
            for (h, w), n in itertools.product(SHAPES, VIDEO_NFRAMES):
                count += 1
                expected = lib_video_hw(library, h, w, n, f, budget)
                got = ours(resized_hw, h, w, n, spec)
                errors += expected == "ValueError"
                if got != expected:
                    mismatches.append((h, w, n, f, budget, expected, got))
    assert count == RESIZE_GRID_SIZE
    assert 0 < errors < count
    assert not mismatches, _report(mismatches, count)


def test_image_sizes_match_smart_resize_with_fetch_image_defaults_on_the_grid():
    mismatches, count = [], 0
    for f in FACTORS:
        for budget in image_budgets(f):
            lo = budget.get("min_pixels", vp.IMAGE_MIN_TOKEN_NUM * f * f)
            hi = budget.get("max_pixels", vp.IMAGE_MAX_TOKEN_NUM * f * f)
            for h, w in SHAPES:
                count += 1
                try:
                    expected: Any = vp.smart_resize(h, w, factor=f, min_pixels=lo, max_pixels=hi)
                    expected = "ValueError" if 0 in expected else expected
                except ValueError:
                    expected = "ValueError"
                got = ours(resized_image_hw, h, w, ImageSpec(size_factor=f, **budget))
                if got != expected:
                    mismatches.append((h, w, f, budget, expected, got))
    assert count == IMAGE_GRID_SIZE
    assert not mismatches, _report(mismatches, count)


@pytest.mark.parametrize("f", FACTORS)
@pytest.mark.parametrize(("h", "w"), [(1, 1), (13, 200), (240, 320), (300, 37), (64, 12000)])
def test_fetch_image_itself_agrees_on_real_pil_images(f, h, w):
    from PIL import Image

    for budget in image_budgets(f)[:3]:
        ele: dict[str, Any] = {"image": Image.new("RGB", (w, h), (10, 20, 30)), **budget}
        out = vp.fetch_image(ele, image_patch_size=f // 2)
        assert resized_image_hw(h, w, ImageSpec(size_factor=f, **budget)) == (out.height, out.width)


# -- everything at once: reader + budget + resize ---------------------------------------------------------------------


def test_fetch_video_end_to_end_on_random_settings(library):
    real_reader = vp.VIDEO_READER_BACKENDS["torchvision"]
    rng = random.Random(20260101)
    mismatches = []
    for case in range(COMPOSED_GRID_SIZE):
        total = rng.choice([rng.randint(1, 40), rng.randint(40, 3000), rng.randint(3000, 2_000_000)])
        native = rng.choice([*NATIVE_FPS, round(rng.uniform(0.2, 300), 3)])
        f = rng.choice(FACTORS)
        h, w = rng.choice([*SHAPES, (rng.randint(1, 5000), rng.randint(1, 5000))])
        ele: dict[str, Any] = dict(rng.choice(video_budgets(f)))
        if rng.random() < 0.25:
            ele["nframes"] = rng.randint(2, 800)
        else:
            ele.update(fps=rng.choice([*TARGET_FPS, rng.uniform(0.1, 8)]), min_frames=rng.randint(1, 32))
            ele["max_frames"] = rng.randint(max(2, ele["min_frames"]), 1024)

        def reader(e: dict[str, Any]) -> tuple[Any, dict[str, Any], float]:
            video, meta, sample_fps = real_reader(e)
            return video.expand(video.shape[0], 3, h, w), meta, sample_fps

        FakeSource.total, FakeSource.fps = total, native
        vp.VIDEO_READER_BACKENDS["evr1-grid"] = reader
        try:
            vp.fetch_video({"video": "grid.mp4", **ele}, image_patch_size=f // 2, return_video_metadata=True)
            size = library.pop("size")
            expected: Any = "ValueError" if 0 in size else (size, tuple(_last_meta(real_reader, ele)))
        except ValueError:
            expected = "ValueError"
        finally:
            del vp.VIDEO_READER_BACKENDS["evr1-grid"]
        try:
            spec = spec_from(ele, f)
            idx = sample_frame_indices(total, native, spec)
            got: Any = (resized_hw(h, w, len(idx), spec), idx)
        except ValueError:
            got = "ValueError"
        if got != expected:
            mismatches.append((case, total, native, f, (h, w), ele, _brief(expected), _brief(got)))
    assert not mismatches, _report(mismatches, COMPOSED_GRID_SIZE)


def _brief(x: Any) -> Any:
    return x if isinstance(x, str) else (x[0], _short(x[1]))


def _last_meta(real_reader: Any, ele: dict[str, Any]) -> list[int]:
    _, meta, _ = real_reader({"video": "grid.mp4", **ele})
    result: list[int] = meta["frames_indices"].tolist()
    return result


# -- the metadata contract with transformers --------------------------------------------------------------------------


def _meta_for(total: int, fps: float, h: int, w: int, spec: SamplingSpec) -> VideoMeta:
    idx = sample_frame_indices(total, fps, spec)
    rh, rw = resized_hw(h, w, len(idx), spec)
    return VideoMeta(
        total_num_frames=total,
        fps=fps,
        duration=total / fps,
        width=w,
        height=h,
        frames_indices=idx,
        video_backend="pyav",
        resized_height=rh,
        resized_width=rw,
        spec_key=spec.key(),
        source="a.mp4",
    )


def test_to_hf_builds_a_transformers_video_metadata():
    video_utils = reference_module("transformers.video_utils")
    meta = _meta_for(300, 29.97, 360, 640, SamplingSpec())
    hf = video_utils.VideoMetadata(**meta.to_hf())
    assert hf.total_num_frames == 300
    assert hf.fps == 29.97
    assert list(hf.frames_indices) == list(meta.frames_indices)
    assert hf.timestamps == list(meta.timestamps)
    assert hf.sampled_fps == pytest.approx(len(meta.frames_indices) / 300 * 29.97)
    # also as the plain dict processors take (they build VideoMetadata(**d) themselves)
    assert video_utils.make_batched_metadata([object()], [meta.to_hf()])[0].frames_indices == hf.frames_indices


@pytest.mark.parametrize(
    ("module", "cls", "f"),
    [
        ("transformers.models.qwen2_vl.video_processing_qwen2_vl", "Qwen2VLVideoProcessor", 28),
        ("transformers.models.qwen3_vl.video_processing_qwen3_vl", "Qwen3VLVideoProcessor", 32),
    ],
)
def test_qwen_video_processors_take_cached_frames_unchanged(module, cls, f):
    np = reference_module("numpy")
    processor_cls = getattr(reference_module(module), cls)
    spec = SamplingSpec(size_factor=f)
    meta = _meta_for(250, 25.0, 360, 640, spec)
    n, rh, rw = len(meta.frames_indices), meta.resized_height, meta.resized_width
    frames = np.zeros((n, rh, rw, 3), dtype=np.uint8)
    processor = processor_cls(size={"shortest_edge": 1, "longest_edge": n * rh * rw})
    out = processor(
        videos=[frames],
        video_metadata=[meta.to_hf()],
        do_sample_frames=False,
        return_metadata=True,
        return_tensors="pt",
    )
    patch = f // 2
    assert out["video_grid_thw"].tolist() == [[n // 2, rh // patch, rw // patch]]
    back = out["video_metadata"][0]
    assert list(back.frames_indices) == list(meta.frames_indices)
    assert back.fps == meta.fps
