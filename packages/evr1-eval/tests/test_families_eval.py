"""evr1-eval asks the model family (evr1_cache.families), light: no engine. The real engines per family run in
test_engine_families.py (`nox -s eval_engines`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from evr1_cache.families import family_or_none, get_family
from evr1_cache.spec import SamplingSpec
from evr1_eval.backends import Request, VideoInput
from evr1_eval.backends.base import BackendError, model_family, processor_media_kwargs
from evr1_eval.backends.vllm import video_item
from evr1_eval.jobs import image_spec_for, sampling_overrides

META = {"total_num_frames": 40, "fps": 10.0, "frames_indices": [0, 13, 26, 39], "width": 96, "height": 64}


def _checkpoint(tmp_path: Path, model_type: str) -> Path:
    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    return folder


@pytest.mark.parametrize(
    ("model_type", "factor", "family"),
    [
        ("qwen2_5_vl", 28, None),
        ("qwen3_vl_moe", 32, None),
        ("qwen3_5", 32, None),
        ("glm4v_moe", None, "glm4v"),
        ("internvl", None, "internvl"),
    ],
)
def test_the_models_family_fills_the_benchmark_spec(tmp_path: Path, model_type, factor, family) -> None:
    model = str(_checkpoint(tmp_path, model_type))
    bench_spec = SamplingSpec(fps=1.0, max_frames=32)
    over = sampling_overrides(bench_spec, {}, model)
    spec = dataclasses.replace(bench_spec, **over)
    fam = get_family(model_type)
    assert family_or_none(model) is fam
    assert spec.family == family  # Qwen families use the spec's own rule and keep their keys
    if factor is not None:
        assert spec.size_factor == factor
    fam.check_fits(spec)
    fam.check_fits(image_spec_for(spec))
    assert spec.fps == 1.0  # the benchmark's frame rate stays
    # an explicit override wins over the family
    assert (
        sampling_overrides(bench_spec, {"size_factor": 28}, str(_checkpoint(tmp_path, "qwen3_vl")))["size_factor"] == 28
    )


def test_an_unknown_model_keeps_the_spec_as_given(tmp_path: Path) -> None:
    model = str(_checkpoint(tmp_path, "llava"))
    assert family_or_none(model) is None
    assert sampling_overrides(SamplingSpec(), {"fps": 1.0}, model) == {"fps": 1.0}
    assert model_family(model) is None
    assert model_family("anything", "glm4v").name == "glm4v"  # the loaded config's model_type decides


def test_media_reach_the_processor_as_the_family_prescribes() -> None:
    frames = np.zeros((4, 56, 56, 3), np.uint8)
    req = Request(id="r", prompt="q", videos=(VideoInput(frames, {**META, "do_sample_frames": True}),))
    for name in ("qwen2_5_vl", "glm4v"):
        kw = processor_media_kwargs(get_family(name), req)
        assert kw["do_sample_frames"] is False
        assert kw["do_resize"] is False
        assert "do_sample_frames" not in kw["video_metadata"][0]  # VideoMetadata(**d) would refuse it
    internvl = processor_media_kwargs(get_family("internvl"), req)
    assert internvl["do_sample_frames"] is False
    assert "do_resize" not in internvl  # InternVL tiles are made by the processor's resize
    generic = processor_media_kwargs(None, req)
    assert set(generic) == {"video_metadata", "do_sample_frames"}
    with pytest.raises(BackendError, match="lacks"):
        processor_media_kwargs(None, Request(id="r", prompt="q", videos=(VideoInput(frames, {"fps": 1.0}),)))
    got_frames, meta = video_item(frames, dict(META), get_family("qwen3_vl"))
    assert got_frames is frames
    assert meta["do_sample_frames"] is False
    assert meta["frames_indices"] == META["frames_indices"]


def test_glm_refuses_a_benchmark_with_a_fixed_frame_count(tmp_path: Path) -> None:
    model = str(_checkpoint(tmp_path, "glm4v"))
    bench = SamplingSpec(fps=None, nframes=16)
    with pytest.raises(ValueError, match=r"GLM-4\.1V samples by fps only"):
        dataclasses.replace(bench, **sampling_overrides(bench, {}, model))
    spec = dataclasses.replace(bench, **sampling_overrides(bench, {"fps": 2.0, "nframes": None}, model))
    assert spec.family == "glm4v"
