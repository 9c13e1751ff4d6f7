"""evr1_cache.families on its own (stdlib only): the registry, the families' rules and their place in the spec.

Parity of each family's rules with its reference implementation (transformers' processors, qwen-vl-utils) lives in
test_family_parity.py (needs torch + transformers; `nox -s spec_parity`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evr1_cache.families import ModelFamily, family_for_model, family_names, family_or_none, get_family, register
from evr1_cache.families.glm4v import glm_smart_resize
from evr1_cache.families.internvl import segment_indices
from evr1_cache.spec import ImageSpec, SamplingSpec, VideoMeta, resized_hw, resized_image_hw, sample_frame_indices

BUILT_IN = ["glm4v", "internvl", "qwen2_5_vl", "qwen3_5", "qwen3_vl"]
MODEL_TYPES = {
    "qwen2_vl": "qwen2_5_vl",
    "qwen2_5_vl": "qwen2_5_vl",
    "qwen3_vl": "qwen3_vl",
    "qwen3_vl_moe": "qwen3_vl",
    "qwen3_5": "qwen3_5",
    "qwen3_5_moe": "qwen3_5",
    "glm4v": "glm4v",
    "glm4v_moe": "glm4v",
    "internvl": "internvl",
}


def _meta(indices: tuple[int, ...], fps: float = 10.0, total: int = 100, h: int = 56, w: int = 84) -> VideoMeta:
    return VideoMeta(
        total_num_frames=total,
        fps=fps,
        duration=total / fps,
        width=w,
        height=h,
        frames_indices=indices,
        video_backend="test",
        resized_height=h,
        resized_width=w,
    )


# -- registry ---------------------------------------------------------------------------------------------------------


def test_every_family_is_registered_under_its_name_and_model_types():
    assert family_names() == BUILT_IN
    for model_type, name in MODEL_TYPES.items():
        assert get_family(model_type).name == name
    for name in BUILT_IN:
        fam = get_family(name)
        assert fam is get_family(fam)
        assert fam.end_of_turn
        assert fam.image_token in fam.vision_tokens
        assert fam.video_token in fam.vision_tokens
        assert set(fam.feature_tokens) <= set(fam.vision_tokens)
        assert fam.size_factor in fam.size_factors
        assert fam.checkpoints


def test_register_refuses_duplicate_names_and_model_types():
    qwen = get_family("qwen2_5_vl")
    with pytest.raises(ValueError, match="already registered"):
        register(qwen)
    clash = dataclasses.replace(qwen, name="my_qwen")
    with pytest.raises(
        ValueError, match=r"model_type\(s\) \['qwen2_5_vl', 'qwen2_vl'\] already belong to 'qwen2_5_vl'"
    ):
        register(clash)
    assert "my_qwen" not in family_names()  # a refused registration leaves nothing behind


def test_unknown_names_suggest_the_closest_family():
    with pytest.raises(KeyError, match=r"did you mean 'glm4v'"):
        get_family("glm4")
    with pytest.raises(KeyError, match=r"did you mean 'qwen3_vl'"):
        get_family("qwen3-vl")
    with pytest.raises(KeyError, match="known: glm4v, internvl"):
        get_family("llava")


def test_family_for_model_reads_the_checkpoint_config(tmp_path: Path):
    for model_type, name in MODEL_TYPES.items():
        folder = tmp_path / model_type
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
        assert family_for_model(folder).name == name
        assert family_for_model(str(folder)).name == name
    assert family_for_model("Qwen/Qwen3-VL-30B-A3B-Instruct").name == "qwen3_vl"
    assert family_for_model("OpenGVLab/InternVL3_5-8B-HF").name == "internvl"
    assert family_for_model("glm4v_moe").name == "glm4v"
    bad = tmp_path / "llava"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "llava"}))
    with pytest.raises(KeyError, match="model_type 'llava' is not served by any evr1 model family"):
        family_for_model(bad)
    (bad / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a readable model config"):
        family_for_model(bad)
    assert family_or_none(bad) is None
    assert family_or_none(None) is None
    assert family_or_none(tmp_path / "qwen3_5").name == "qwen3_5"


# -- the spec asks the family ---------------------------------------------------------------------------------------


def test_specs_without_a_family_keep_their_keys_and_dicts():
    # Every cache on disk is filed under these keys; adding `family` must not move them.
    assert SamplingSpec().key() == "61848fabe9c3bd16"  # the same pin as test_spec.py
    assert "family" not in SamplingSpec().to_dict()
    assert "family" not in ImageSpec().to_dict()
    assert SamplingSpec.from_dict(SamplingSpec(size_factor=32).to_dict()) == SamplingSpec(size_factor=32)


def test_family_specs_resolve_the_familys_defaults_and_have_their_own_keys():
    keys = {}
    for name in BUILT_IN:
        fam = get_family(name)
        spec = fam.video_spec()
        assert spec.family == (None if fam.spec_rule else name)
        assert spec.size_factor == fam.size_factor
        assert SamplingSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
        assert ImageSpec.from_dict(fam.image_spec().to_dict()) == fam.image_spec()
        keys[name] = spec.key()
    # The Qwen families' rule is the spec's own: their specs are the family-less ones (caches are shared).
    assert keys["qwen2_5_vl"] == SamplingSpec().key()
    assert keys["qwen3_vl"] == keys["qwen3_5"] == SamplingSpec(size_factor=32).key()
    assert len({keys["qwen2_5_vl"], keys["qwen3_vl"], keys["glm4v"], keys["internvl"]}) == 4
    assert SamplingSpec(family="qwen3_vl") == SamplingSpec(size_factor=32)
    assert get_family("qwen3_vl").video_spec().min_pixels == 128 * 32 * 32
    assert get_family("glm4v").video_spec().min_pixels == 112 * 112
    assert get_family("internvl").image_spec().max_pixels == 12 * 448 * 448


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"family": "qwen3_vl", "size_factor": 28}, "does not fit family 'qwen3_vl'"),
        ({"family": "glm4v", "size_factor": 32}, "does not fit family 'glm4v'"),
        ({"family": "internvl", "size_factor": 100}, "tile side"),
        ({"family": "glm4v", "fps": None, "nframes": 8}, "GLM-4.1V samples by fps only"),
        ({"family": "qwn3_vl"}, "did you mean 'qwen3_vl'"),
        ({"family": 3}, "must be a model-family name"),
    ],
)
def test_family_specs_refuse_settings_the_rule_cannot_honour(kwargs, match):
    with pytest.raises((ValueError, KeyError), match=match):
        SamplingSpec(**kwargs)


def test_qwen_families_are_exactly_the_qwen_vl_utils_spec():
    for name, factor in (("qwen2_5_vl", 28), ("qwen3_vl", 32), ("qwen3_5", 32)):
        fam = get_family(name)
        for total, fps, target in itertools.product((7, 30, 301, 9000), (7.5, 29.97, 60.0), (0.5, 2.0)):
            plain = SamplingSpec(fps=target, size_factor=factor, total_pixels=4096 * factor * factor)
            family = fam.video_spec(fps=target, total_pixels=4096 * factor * factor)
            expected = sample_frame_indices(total, fps, plain)
            assert sample_frame_indices(total, fps, family) == expected
            assert resized_hw(360, 640, len(expected), family) == resized_hw(360, 640, len(expected), plain)
        assert resized_image_hw(1080, 1920, fam.image_spec()) == resized_image_hw(
            1080, 1920, ImageSpec(size_factor=factor)
        )


# -- GLM-4.1V -------------------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    total=st.integers(2, 40_000),
    native=st.sampled_from([1.0, 7.5, 23.976, 25.0, 29.97, 30.0, 60.0, 240.0]),
    target=st.sampled_from([0.5, 1.0, 2.0, 4.0]),
)
def test_glm_frames_are_even_sorted_unique_but_the_last_and_inside_the_video(total, native, target):
    spec = get_family("glm4v").video_spec(fps=target)
    idx = sample_frame_indices(total, native, spec)
    assert len(idx) % 2 == 0
    assert len(idx) >= 2
    assert all(0 <= i < total for i in idx)
    assert list(idx) == sorted(idx)
    body = idx[:-1]
    assert len(set(body)) == len(body)  # only the last frame may repeat (odd counts)
    duration = total / native
    if duration > 300:
        assert len(idx) <= int(300 * target) + 1
    else:
        assert len(idx) <= max(int(duration * target), 1) + 1


def test_glm_sizes_bound_the_whole_clip():
    spec = get_family("glm4v").video_spec(total_pixels=28 * 28 * 2 * 300)
    for n in (2, 8, 32, 128):
        h, w = resized_hw(720, 1280, n, spec)
        assert h % 28 == 0
        assert w % 28 == 0
        t = n + n % 2
        assert t * h * w <= 28 * 28 * 2 * 300 or (h, w) == (28, 28) or min(h, w) == 28
    # fewer frames, bigger frames: the budget is over t x h x w
    assert resized_hw(720, 1280, 4, spec)[0] > resized_hw(720, 1280, 64, spec)[0]
    with pytest.raises(ValueError, match="at least 2 frames"):
        glm_smart_resize(1, 100, 100, 28, 1, 10**9)
    with pytest.raises(ValueError, match="aspect ratio"):
        resized_hw(10, 2100, 4, spec)


def test_glm_prompt_writes_integer_seconds_after_each_temporal_patch():
    fam = get_family("glm4v")
    meta = _meta((0, 15, 30, 45, 60, 60), fps=30.0, total=61)
    text = fam.video_prompt(meta, 56, 84)
    per = "<|image|>" * 6  # (56/14 * 84/14) / 4
    assert text == f"<|begin_of_image|>{per}<|end_of_image|>0" + f"<|begin_of_image|>{per}<|end_of_image|>1" * 1 + (
        f"<|begin_of_image|>{per}<|end_of_image|>2"
    )
    assert fam.video_tokens(6, 56, 84) == 18
    assert fam.video_timing(meta) == {"frame_seconds": [0.0, 1.0, 2.0]}


# -- InternVL -------------------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(total=st.integers(1, 100_000), n=st.integers(1, 64))
def test_internvl_takes_one_frame_per_segment(total, n):
    if n > total:
        with pytest.raises(ValueError, match="one frame per segment"):
            segment_indices(total, n)
        return
    idx = segment_indices(total, n)
    assert len(idx) == n
    assert all(0 <= i < total for i in idx)
    step = total / n
    for k, i in enumerate(idx):  # frame k lies in segment k (float32 rounding may touch the segment's edge)
        assert k * step - 1 <= i <= (k + 1) * step


def test_internvl_frames_are_tile_squares_and_images_keep_their_shape():
    fam = get_family("internvl")
    spec = fam.video_spec(nframes=8)
    assert spec.fps is None
    assert resized_hw(360, 640, 8, spec) == (448, 448)
    assert sample_frame_indices(301, 30.0, spec) == segment_indices(301, 8)
    fps_spec = fam.video_spec(fps=1.0, min_frames=2, max_frames=6)
    assert len(sample_frame_indices(3000, 30.0, fps_spec)) == 6  # 100 s at 1 fps, bounded by max_frames
    assert len(sample_frame_indices(90, 30.0, fps_spec)) == 3
    image = fam.image_spec()
    assert resized_image_hw(600, 800, image) == (600, 800)
    h, w = resized_image_hw(4000, 6000, image)
    assert h * w <= 12 * 448 * 448
    assert abs(w / h - 1.5) < 0.01
    assert fam.tiles(448, 448, image) == 1
    assert fam.tiles(448, 896, image) == 3  # 2 tiles + thumbnail
    assert fam.image_tokens(448, 896, image) == 3 * 256
    assert fam.video_tokens(8, 448, 448) == 8 * 256
    with pytest.raises(ValueError, match="squares of the tile side"):
        fam.video_tokens(8, 448, 640)
    assert fam.video_timing(_meta((1, 2))) == {}


# -- prompt expansion -------------------------------------------------------------------------------------------------


def test_qwen3_prompts_carry_the_mean_time_of_each_temporal_patch():
    fam = get_family("qwen3_vl")
    meta = _meta((0, 5, 10, 15, 20), fps=10.0)  # odd: the last frame is repeated to fill the patch
    assert fam.frame_seconds(meta) == [0.25, 1.25, 2.0]
    text = fam.video_prompt(meta, 32, 64)
    assert text.count("<|video_pad|>") == fam.video_tokens(5, 32, 64) == 3 * 2
    assert text.startswith("<0.2 seconds><|vision_start|>")  # Python's round-half-even formatting of 0.25
    qwen25 = get_family("qwen2_5_vl")
    assert qwen25.video_timing(_meta((0, 50), fps=10.0, total=100)) == {"second_per_grid_ts": [10.0]}
    assert qwen25.video_prompt(_meta((0, 50)), 56, 84) == "<|video_pad|>" * 6


def test_expand_prompt_replaces_placeholders_in_order_and_counts_them():
    fam = get_family("glm4v")
    text = "<|user|>\n<|begin_of_video|><|video|><|end_of_video|><|begin_of_image|><|image|><|end_of_image|>hi"
    out = fam.expand_prompt(text, [(_meta((0, 10)), 56, 56)], [(56, 56)])
    assert out.count("<|image|>") == 4 + 4  # 2x2 merged patches per frame pair, and per image
    with pytest.raises(ValueError, match=re.escape("more '<|image|>' placeholders")):
        fam.expand_prompt(text, [(_meta((0, 10)), 56, 56)], [])
    with pytest.raises(ValueError, match="no placeholder for them"):
        fam.expand_prompt("no media", [], [(56, 56)])
    with pytest.raises(ValueError, match="not a multiple of"):
        get_family("qwen2_5_vl").video_tokens(4, 50, 56)


def test_hf_and_vllm_arguments_switch_off_resampling():
    meta = _meta((0, 10))
    for name in BUILT_IN:
        fam = get_family(name)
        kw = fam.hf_kwargs([meta])
        assert kw["do_sample_frames"] is False
        assert kw["video_metadata"][0]["frames_indices"] == [0, 10]
        frames, md = fam.vllm_video("frames", meta.to_hf())
        assert frames == "frames"
        assert md["do_sample_frames"] is False
        assert md["fps"] == 10.0
    internvl = get_family("internvl")
    assert internvl.hf_kwargs(images=True) == {}  # the checkpoint's processor config decides the tiles
    assert internvl.hf_kwargs(image_spec=internvl.image_spec(max_pixels=6 * 448 * 448), images=True) == {
        "crop_to_patches": True,
        "min_patches": 1,
        "max_patches": 6,
    }
    assert get_family("glm4v").vllm_processor_kwargs() == {"do_resize": False}


@pytest.mark.parametrize(
    ("family", "extra"), [("glm4v", ["--fps", "2"]), ("internvl", ["--nframes", "4"]), ("qwen3_vl", ["--fps", "2"])]
)
def test_cache_build_with_family_applies_the_familys_rule(tmp_path: Path, family: str, extra: list[str], capsys):
    """`evr1-cache build --family F` caches the frames and sizes F's rule picks, under a spec that names F."""
    from evr1_cache import CacheReader
    from evr1_cache.cli import main
    from evr1_cache.testing import make_synthetic_video, read_frame_index

    make_synthetic_video(tmp_path / "v.mp4", 45, 15.0, (96, 64))
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"problem": "q", "answer": "A", "videos": ["v.mp4"], "images": []}) + "\n")
    assert main(["build", str(data), "--out", str(tmp_path / "c"), "--family", family, *extra, "--no-progress"]) == 0
    fam = get_family(family)
    spec = fam.video_spec(**({"nframes": 4} if "--nframes" in extra else {"fps": 2.0}))
    ref = json.loads((tmp_path / "c" / "d.evr1.jsonl").read_text().splitlines()[0])["video_cache"][0]
    entry = CacheReader(tmp_path / "c").entry_at(ref, spec)  # refused unless built under the family's spec
    frames = entry.frames
    want = fam.sample_frame_indices(45, 15.0, spec)
    assert tuple(entry.video_meta.frames_indices) == want
    assert [read_frame_index(f) for f in frames] == list(want)  # the frames the rule picked, in order
    assert frames.shape[1:3] == fam.resized_hw(64, 96, len(want), spec)
    assert entry.video_meta.resized_height == frames.shape[1]
    assert main(["build", str(data), "--out", str(tmp_path / "c2"), "--family", "glm4", "--no-progress"]) == 2
    assert "glm4v" in capsys.readouterr().err  # an unknown family names the closest one


def test_a_new_family_is_one_registration():
    fam = dataclasses.replace(get_family("qwen2_5_vl"), name="tiny_test_family", model_types=("tiny_test_type",))
    register(fam)
    try:
        assert get_family("tiny_test_type") is fam
        spec = SamplingSpec(family="tiny_test_family")
        assert sample_frame_indices(100, 10.0, spec) == sample_frame_indices(100, 10.0, SamplingSpec())
    finally:
        from evr1_cache.families import registry

        registry._FAMILIES.pop("tiny_test_family")
        registry._BY_MODEL_TYPE.pop("tiny_test_type")
    assert isinstance(fam, ModelFamily)


def test_importing_the_families_loads_only_the_standard_library():
    code = textwrap.dedent(
        """
        import sys
        before = set(sys.modules)
        import evr1_cache.families
        new = sorted(set(sys.modules) - before)
        print(repr([m for m in new if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "evr1_cache"]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert eval(out.stdout) == []  # a repr of a list of module names, printed by the child above
