"""Presets (published evaluation settings) and the evr1 protocol's settings object."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from evr1_cache.spec import SamplingSpec
from evr1_eval.benchmarks import available_benchmarks, get_benchmark
from evr1_eval.jobs import resolve_settings, sampling_overrides
from evr1_eval.presets import Preset, Source, apply_response_filter, available_presets, get_preset, register
from evr1_eval.protocol import Evr1Settings, ProtocolSettings


@pytest.mark.parametrize("name", available_presets())
def test_every_preset_builds_a_valid_sampling_spec_for_every_benchmark(name: str) -> None:
    preset = get_preset(name)
    assert preset.sources
    assert all(s.what and s.where for s in preset.sources)
    for bench_name in available_benchmarks():
        bench = get_benchmark(bench_name)
        overrides = sampling_overrides(bench.sampling, preset.sampling_for(bench_name), None)
        spec = dataclasses.replace(bench.sampling, **overrides)
        assert isinstance(spec, SamplingSpec)
        assert spec.fps == 2.0
    record = preset.record()
    assert json.loads(json.dumps(record)) == record  # the manifest stores it as JSON


def test_the_published_numbers_are_the_presets() -> None:
    qwen3 = get_preset("qwen3_vl_official")
    assert qwen3.sampling_for("lvbench")["max_frames"] == 2048
    assert qwen3.sampling_for("lvbench")["total_pixels"] == 224_000 * 32 * 32
    assert qwen3.sampling_for("videomme")["max_frames"] == 512  # the repository's own Video-MME script
    assert qwen3.sampling_for("videomme")["total_pixels"] == 19_267_584
    assert qwen3.generation["temperature"] == 0.7
    assert qwen3.generation["presence_penalty"] == 1.5  # applied by every backend (GenerationParams)
    assert not qwen3.unapplied_generation
    thinking = get_preset("qwen3_vl_thinking_official")
    assert (thinking.generation["temperature"], thinking.generation["top_p"]) == (0.6, 0.95)
    assert thinking.response_filter == "after_think"
    qwen25 = get_preset("qwen2_5_vl_official")
    assert qwen25.sampling["total_pixels"] == 24_576 * 28 * 28
    assert qwen25.sampling["max_frames"] == 768


def test_registry_refuses_duplicates_and_suggests_names() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(get_preset("qwen2_5_vl_official"))
    with pytest.raises(KeyError, match="did you mean 'qwen3_vl_official'"):
        get_preset("qwen3_vl_oficial")
    with pytest.raises(ValueError, match="must cite its sources"):
        Preset(name="x", family="x", description="x", sources=())
    with pytest.raises(ValueError, match="unapplied_generation"):
        Preset(name="x", family="x", description="x", sources=(Source("a", "b"),), generation={"min_p": 0.1})


def test_response_filter_reads_the_answer_after_thinking() -> None:
    assert apply_response_filter("<think>A? B?</think>\n C ", "after_think") == "C"
    assert apply_response_filter("plain B", "after_think") == "plain B"
    assert apply_response_filter("<think>A</think>B", "none") == "<think>A</think>B"


def test_evr1_settings_are_one_typed_object_filled_from_outside(tmp_path: Path) -> None:
    default = Evr1Settings()
    text = default.render("multiple_choice", "What?", ["A. x", "B. y"], n_videos=1)
    assert text == (
        "Watch the video carefully.\nQuestion: What?\nOptions:\nA. x\nB. y\n"
        "Think step by step inside <think></think>, then give the option letter inside <answer></answer>."
    )
    assert 'JSON {"time": [start_seconds, end_seconds]}' in default.render("temporal_grounding", "When?", [])
    assert default.render("open_ended", "Why?", [], n_videos=1, n_images=1).startswith(
        "Examine the video and the accompanying image carefully."
    )
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"think": False, "stop": ["</answer>"], "sampling": {"max_frames": 16}}))
    loaded = Evr1Settings.from_file(path)
    assert loaded.source == "cli:s.json"
    assert loaded.stop == ("</answer>",)
    assert loaded.key() != default.key()
    assert dataclasses.replace(loaded, source="train:x").key() == loaded.key()  # where it came from is not a setting
    with pytest.raises(ValueError, match="unknown evr1 settings keys"):
        Evr1Settings.from_dict({"thinking": True})
    with pytest.raises(ValueError, match="placeholder"):
        Evr1Settings(template="{question} {nonsense}")
    settings = resolve_settings(protocol="evr1", evr1_settings=path)
    assert settings.sampling_for("mvbench") == {"max_frames": 16}
    assert settings.generation({})["stop"] == ("</answer>",)
    assert settings.protocol.record()["evr1_key"] == loaded.key()
    with pytest.raises(ValueError, match="applies to the official protocol only"):
        ProtocolSettings(protocol="evr1", prompt_variant="qwen3_vl")
    with pytest.raises(ValueError, match="applies to --protocol evr1 only"):
        resolve_settings(protocol="official", evr1_settings=path)
