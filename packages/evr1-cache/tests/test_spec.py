"""evr1_cache.spec on its own (stdlib only): validation, cache keys, JSON round-trip, invariants, import weight.

Parity with qwen-vl-utils itself lives in test_spec_parity.py (needs torch; `nox -s spec_parity`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evr1_cache.spec import (
    SPEC_VERSION,
    ImageSpec,
    SamplingSpec,
    VideoMeta,
    resized_hw,
    resized_image_hw,
    sample_frame_indices,
)

# -- SamplingSpec / ImageSpec ----------------------------------------------------------------------------------------


def test_defaults_resolve_to_qwen_budgets_for_each_factor():
    spec = SamplingSpec()
    assert (spec.fps, spec.nframes) == (2.0, None)
    assert (spec.min_pixels, spec.max_pixels, spec.total_pixels) == (128 * 28 * 28, 768 * 28 * 28, None)
    qwen3 = SamplingSpec(size_factor=32)
    assert (qwen3.min_pixels, qwen3.max_pixels) == (128 * 32 * 32, 768 * 32 * 32)
    fixed = SamplingSpec(fps=None, nframes=16)
    assert (fixed.fps, fixed.nframes) == (None, 16)
    image = ImageSpec(size_factor=32)
    assert (image.min_pixels, image.max_pixels) == (4 * 32 * 32, 16384 * 32 * 32)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"fps": 2.0, "nframes": 16}, "either fps or nframes"),
        ({"fps": 0.0}, "fps must be a finite number > 0"),
        ({"fps": -1.0}, "fps must be a finite number > 0"),
        ({"fps": float("nan")}, "fps must be a finite number > 0"),
        ({"fps": float("inf")}, "fps must be a finite number > 0"),
        ({"fps": "2"}, "fps must be a number"),
        ({"fps": None, "nframes": 1}, "nframes must be >= 2"),
        ({"fps": None, "nframes": True}, "nframes must be an integer"),
        ({"fps": None, "nframes": 4.5}, "nframes must be an integer"),
        ({"min_frames": 0}, "min_frames must be >= 1"),
        ({"min_frames": 10, "max_frames": 8}, r"max_frames \(8\) must be >= min_frames \(10\)"),
        ({"size_factor": 14}, "not the patch size"),
        ({"min_pixels": 0}, "min_pixels must be >= 1"),
        ({"min_pixels": 1000, "max_pixels": 999}, r"max_pixels \(999\) must be >= min_pixels \(1000\)"),
        ({"total_pixels": 0}, "total_pixels must be >= 1"),
        ({"min_pixels": 100.5}, "min_pixels must be an integer"),
    ],
)
def test_sampling_spec_rejects_bad_settings_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SamplingSpec(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"size_factor": 16}, "size_factor must be 28"),
        ({"min_pixels": 10, "max_pixels": 5}, "max_pixels"),
        ({"max_pixels": -1}, "max_pixels must be >= 1"),
    ],
)
def test_image_spec_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ImageSpec(**kwargs)


def test_specs_are_frozen_and_hashable():
    spec = SamplingSpec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.fps = 1.0  # type: ignore[misc]
    assert len({spec, SamplingSpec(), ImageSpec()}) == 2


def test_integral_floats_and_int_fps_normalise_to_the_same_spec_and_key():
    a = SamplingSpec(fps=2, min_pixels=128 * 28 * 28 * 1.0, max_frames=768.0)
    b = SamplingSpec(fps=2.0)
    assert a == b
    assert a.key() == b.key()
    assert isinstance(a.fps, float)
    assert isinstance(a.min_pixels, int)


def test_key_is_short_hex_and_changes_with_every_setting():
    base = SamplingSpec(fps=2.0, min_frames=4, max_frames=768, min_pixels=100, max_pixels=1000, total_pixels=10**6)
    key = base.key()
    assert len(key) == 16
    int(key, 16)
    variants = [
        dataclasses.replace(base, fps=1.0),
        dataclasses.replace(base, fps=None, nframes=16),
        dataclasses.replace(base, min_frames=6),
        dataclasses.replace(base, max_frames=64),
        dataclasses.replace(base, min_pixels=101),
        dataclasses.replace(base, max_pixels=1001),
        dataclasses.replace(base, total_pixels=None),
        dataclasses.replace(base, size_factor=32),
        dataclasses.replace(base, resize="torchvision-bicubic-aa-nofma"),
    ]
    keys = {key, *(v.key() for v in variants)}
    assert len(keys) == len(variants) + 1
    assert ImageSpec().key() != SamplingSpec().key()


def test_key_of_the_default_spec_never_changes_silently():
    # A golden value on purpose: every cache on disk is filed under this key. If this fails, the canonical JSON or the
    # hash changed, which orphans all existing caches: bump SPEC_VERSION deliberately and update this value.
    assert SPEC_VERSION == 3
    assert SamplingSpec().key() == _key_in_fresh_process("SamplingSpec()")
    assert SamplingSpec().key() == "61848fabe9c3bd16"


def _key_in_fresh_process(expr: str) -> str:
    code = f"from evr1_cache.spec import SamplingSpec, ImageSpec; print({expr}.key())"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_spec_dict_round_trip_and_unknown_keys_suggest_a_fix():
    spec = SamplingSpec(fps=None, nframes=32, size_factor=32, total_pixels=20480 * 32 * 32)
    assert SamplingSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert ImageSpec.from_dict(ImageSpec(max_pixels=10**6).to_dict()) == ImageSpec(max_pixels=10**6)
    with pytest.raises(ValueError, match="did you mean 'max_pixels'"):
        SamplingSpec.from_dict({"max_pixel": 5})


# -- frame selection invariants (exact parity with qwen-vl-utils: test_spec_parity.py) ------------------------------


@pytest.mark.parametrize("total", [2, 3, 9, 10, 100, 1001, 54_321, 3_000_001])
@pytest.mark.parametrize("native_fps", [0.5, 23.976, 30.0, 240.0])
def test_indices_are_even_sorted_and_span_the_video(total, native_fps):
    idx = sample_frame_indices(total, native_fps, SamplingSpec(fps=2.0, min_frames=4, max_frames=768))
    assert len(idx) % 2 == 0
    assert 2 <= len(idx) <= min(768, total)
    assert idx[0] == 0
    assert idx[-1] == total - 1
    assert all(b > a for a, b in itertools.pairwise(idx))


def test_fps_mode_counts_follow_duration_then_bounds():
    # 10 s at 30 fps, 2 fps target -> 20 frames; min/max frames bound it; frames round down to the frame factor.
    assert len(sample_frame_indices(300, 30.0, SamplingSpec(fps=2.0))) == 20
    assert len(sample_frame_indices(300, 30.0, SamplingSpec(fps=2.0, max_frames=9))) == 8
    assert len(sample_frame_indices(30, 30.0, SamplingSpec(fps=2.0, min_frames=5))) == 6
    assert len(sample_frame_indices(5, 30.0, SamplingSpec(fps=2.0, min_frames=8))) == 4


def test_fixed_count_rounds_half_to_even_like_python():
    counts = {n: len(sample_frame_indices(1000, 30.0, SamplingSpec(fps=None, nframes=n))) for n in (2, 3, 5, 7, 9, 16)}
    assert counts == {2: 2, 3: 4, 5: 4, 7: 8, 9: 8, 16: 16}


@pytest.mark.parametrize(
    ("total", "native_fps", "spec", "match"),
    [
        (1, 30.0, SamplingSpec(), r"cannot sample 0 frame\(s\) from a video of 1 frame"),
        (3, 30.0, SamplingSpec(fps=None, nframes=4), "cannot sample 4 frame"),
        (0, 30.0, SamplingSpec(), "total_num_frames must be >= 1"),
        (100, 0.0, SamplingSpec(), "native_fps must be a finite number > 0"),
        (100, float("nan"), SamplingSpec(), "native_fps must be a finite number > 0"),
        (2**24, 30.0, SamplingSpec(), "beyond float32 frame indexing"),
    ],
)
def test_impossible_sampling_raises_value_error(total, native_fps, spec, match):
    with pytest.raises(ValueError, match=match):
        sample_frame_indices(total, native_fps, spec)


def _to_f32(x: Fraction) -> Fraction:
    """Nearest float32 to a positive rational, ties to even: exact integer arithmetic, no hardware floats."""
    if x == 0:
        return x
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while not 2**23 <= x / Fraction(2) ** (e - 23) < 2**24:
        e += 1 if x / Fraction(2) ** (e - 23) >= 2**24 else -1
    return round(x / Fraction(2) ** (e - 23)) * Fraction(2) ** (e - 23)


@st.composite
def _total_and_count(draw: st.DrawFn) -> tuple[int, int]:
    total = draw(st.one_of(st.integers(2, 5000), st.integers(5000, 2**24 - 1)))
    return total, 2 * draw(st.integers(1, min(total, 800) // 2))


@settings(max_examples=150, deadline=None)
@given(_total_and_count())
def test_indices_equal_an_exact_rational_model_of_torchs_float32_linspace(case):
    # The spec computes float32 steps with doubles + a float32 cast and claims that is exact; check that claim against
    # rational arithmetic rounded to float32 by hand (first half step*i, second half one fused last - step*j).
    total, n = case
    last = total - 1
    step = _to_f32(Fraction(last, n - 1))
    model = tuple(round(_to_f32(step * i) if i < n // 2 else _to_f32(last - step * (n - 1 - i))) for i in range(n))
    assert sample_frame_indices(total, 30.0, SamplingSpec(fps=None, nframes=n)) == model


def test_fixed_mode_ignores_native_fps_like_the_library():
    assert sample_frame_indices(100, 0.0, SamplingSpec(fps=None, nframes=4)) == (0, 33, 66, 99)


# -- sizes -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("factor", [28, 32])
@pytest.mark.parametrize(("h", "w"), [(1, 1), (27, 29), (360, 640), (1080, 1920), (2160, 3840), (4, 800)])
@pytest.mark.parametrize("nframes", [2, 64, 768])
def test_resized_sides_are_factor_multiples_within_the_budget(factor, h, w, nframes):
    spec = SamplingSpec(size_factor=factor)
    rh, rw = resized_hw(h, w, nframes, spec)
    assert rh % factor == 0
    assert rw % factor == 0
    assert rh * rw <= spec.max_pixels
    big = SamplingSpec(size_factor=factor, max_pixels=10**9, total_pixels=10**12)
    assert resized_hw(h, w, nframes, big)[0] * resized_hw(h, w, nframes, big)[1] >= rh * rw


def test_total_pixel_budget_shrinks_frames_as_their_count_grows():
    spec = SamplingSpec(total_pixels=4096 * 28 * 28)
    sizes = [resized_hw(1080, 1920, n, spec) for n in (2, 16, 64, 256)]
    areas = [h * w for h, w in sizes]
    assert areas == sorted(areas, reverse=True)
    assert areas[0] > areas[-1]
    # ...but never below 1.05 x min_pixels' cap
    floor_h, floor_w = resized_hw(1080, 1920, 768, spec)
    assert floor_h * floor_w >= 0.9 * spec.min_pixels  # type: ignore[operator]


def test_aspect_ratio_above_200_is_refused_and_200_is_allowed():
    assert resized_image_hw(10, 2000, ImageSpec()) is not None
    with pytest.raises(ValueError, match=r"aspect ratio 200\.1 > 200"):
        resized_image_hw(10, 2001, ImageSpec())
    with pytest.raises(ValueError, match="crop or pad"):
        resized_hw(3000, 14, 4, SamplingSpec())


def test_a_frame_that_would_shrink_to_zero_pixels_is_refused():
    # qwen-vl-utils returns a 0-pixel side here (then fails inside the resize); we say why instead.
    with pytest.raises(ValueError, match="raise max_pixels"):
        resized_hw(2, 400, 2, SamplingSpec(min_pixels=100, max_pixels=200))


@pytest.mark.parametrize(("h", "w"), [(0, 10), (10, -1), (1.5, 10)])
def test_bad_frame_sizes_raise(h, w):
    with pytest.raises(ValueError, match=r"height|width"):
        resized_image_hw(h, w, ImageSpec())


# -- VideoMeta -------------------------------------------------------------------------------------------------------


def _meta(**overrides):
    values = {
        "total_num_frames": 300,
        "fps": 29.97,
        "duration": 300 / 29.97,
        "width": 640,
        "height": 360,
        "frames_indices": sample_frame_indices(300, 29.97, SamplingSpec()),
        "video_backend": "pyav",
        "resized_height": 336,
        "resized_width": 616,
        "spec_key": SamplingSpec().key(),
        "source": "clips/a.mp4",
        "source_size": 12345,
        "source_mtime_ns": 1_700_000_000_000_000_000,
    }
    values.update(overrides)
    return VideoMeta(**values)


def test_video_meta_json_round_trip_is_exact_and_canonical():
    meta = _meta()
    text = meta.to_json()
    back = VideoMeta.from_json(text)
    assert back == meta
    assert back.fps == 29.97
    assert isinstance(back.frames_indices, tuple)
    assert back.to_json() == text
    assert VideoMeta.from_json(text.encode()) == meta
    assert list(json.loads(text)) == sorted(json.loads(text))


def test_timestamps_are_index_over_native_fps():
    meta = _meta(fps=25.0, frames_indices=(0, 25, 50, 299))
    assert meta.timestamps == (0.0, 1.0, 2.0, 299 / 25.0)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(spec_version=SPEC_VERSION + 1), "spec_version 4 is not this evr1-cache's 3"),
        (lambda d: d.update(spec_version="1"), "spec_version '1'"),
        (lambda d: d.pop("spec_version"), "without spec_version"),
        (lambda d: d.update(frame_indices=[0]), "did you mean 'frames_indices'"),
        (lambda d: d.update(frames_indices=[0, 400]), "< total_num_frames=300"),
        (lambda d: d.update(frames_indices=[5, 3]), "non-decreasing"),
        (lambda d: d.update(frames_indices=[]), "frames_indices is empty"),
        (lambda d: d.update(fps=0), "fps must be a finite number > 0"),
        (lambda d: d.update(duration=float("nan")), "duration must be a finite number >= 0"),
        (lambda d: d.update(video_backend=""), "video_backend"),
        (lambda d: d.update(resized_width=0), "resized_width must be >= 1"),
        (lambda d: d.update(source=7), "source must be a string"),
    ],
)
def test_from_json_refuses_foreign_or_broken_metadata(mutate, match):
    data = json.loads(_meta().to_json())
    mutate(data)
    with pytest.raises(ValueError, match=match):
        VideoMeta.from_json(json.dumps(data))


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", b"\xff\xfe"])
def test_from_json_refuses_malformed_text(text):
    with pytest.raises(ValueError, match="VideoMeta JSON"):
        VideoMeta.from_json(text)


def test_to_hf_is_exactly_transformers_video_metadata_fields():
    hf = _meta().to_hf()
    assert list(hf) == ["total_num_frames", "fps", "width", "height", "duration", "video_backend", "frames_indices"]
    assert isinstance(hf["frames_indices"], list)
    assert hf["frames_indices"] == list(_meta().frames_indices)
    assert "do_sample_frames" not in hf  # transformers' VideoMetadata(**d) would refuse it; pass it to the processor


# -- import weight ---------------------------------------------------------------------------------------------------


def test_importing_spec_loads_only_the_standard_library():
    code = textwrap.dedent(
        """
        import sys
        before = set(sys.modules)
        import evr1_cache.spec
        new = sorted(set(sys.modules) - before)
        outside = [m for m in new if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "evr1_cache"]
        ours = [m for m in new if m.startswith("evr1_cache")]
        print(repr((outside, ours)))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    outside, ours = eval(out.stdout)  # a repr of two lists of module names, printed by the child above
    assert outside == []
    # the package runs its `__init__` first: the spec, its registry helper, the stdlib-only families (their lookup)
    # and the lazy-export helper
    assert {"evr1_cache", "evr1_cache.spec"} <= set(ours)
    assert all(
        m in ("evr1_cache", "evr1_cache.spec", "evr1_cache.registry", "evr1_cache.lazy")
        or m.startswith("evr1_cache.families")
        for m in ours
    ), ours


def test_resize_rules_are_named_versioned_and_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from evr1_cache import spec as spec_module
    from evr1_cache.spec import (
        IMAGE_RESIZE,
        RESIZE_RULES,
        VIDEO_RESIZE,
        ResizeRule,
        get_resize_rule,
        register_resize_rule,
    )

    assert SamplingSpec().resize == VIDEO_RESIZE.name == "torchvision-bicubic-aa"
    assert ImageSpec().resize == IMAGE_RESIZE.name == "pillow-bicubic"
    assert get_resize_rule("torchvision-bicubic-aa").id == "torchvision-bicubic-aa/1"
    with pytest.raises(ValueError, match="did you mean 'pillow-bicubic'"):
        SamplingSpec(resize="pillow-bicubc")
    with pytest.raises(ValueError, match="already registered"):
        register_resize_rule(ResizeRule("pillow-bicubic", 2, "k", "r"))
    with pytest.raises(ValueError, match="slug"):
        ResizeRule("has space", 1, "k", "r")
    # a new implementation version of the same rule gives every spec that uses it a new key (old entries rebuilt)
    before = SamplingSpec().key()
    monkeypatch.setitem(RESIZE_RULES, VIDEO_RESIZE.name, dataclasses.replace(VIDEO_RESIZE, version=2))
    assert SamplingSpec().key() != before
    monkeypatch.setitem(RESIZE_RULES, VIDEO_RESIZE.name, VIDEO_RESIZE)
    assert SamplingSpec().key() == before
    # a family's own rule registers like the built-in ones
    monkeypatch.setattr(spec_module, "RESIZE_RULES", dict(RESIZE_RULES))
    mine = spec_module.register_resize_rule(ResizeRule("glm-test-resize", 1, "bicubic", "a test"))
    assert SamplingSpec(resize=mine.name).key() != before


def test_the_timeline_is_part_of_the_key_and_the_reference_keeps_the_old_one() -> None:
    from evr1_cache.spec import TIMELINES

    base = SamplingSpec(fps=2.0, max_frames=16)
    assert TIMELINES == ("reference", "presentation")
    assert "timeline" not in base.to_dict()  # reference: the keys and stored specs every cache already has
    assert SamplingSpec(fps=2.0, max_frames=16, timeline="reference").key() == base.key()
    shown = SamplingSpec(fps=2.0, max_frames=16, timeline="presentation")
    assert shown.key() != base.key()
    assert shown.to_dict()["timeline"] == "presentation"
    assert SamplingSpec.from_dict(shown.to_dict()) == shown
    with pytest.raises(ValueError, match="did you mean 'presentation'"):
        SamplingSpec(timeline="presentaton")
