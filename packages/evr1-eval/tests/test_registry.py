"""Registry: every benchmark registered once, aliases resolve, unknown names get close suggestions."""

from __future__ import annotations

import dataclasses

import pytest

from evr1_cache.spec import SamplingSpec
from evr1_eval import available_benchmarks, get_benchmark, register

EXPECTED = {
    "videomme", "mvbench", "lvbench", "longvideobench", "mlvu", "mmvu", "videommmu", "video_holmes", "videomathqa",
    "tempcompass", "vsibench", "charades_sta", "stvg", "motionbench", "minerva", "vcrbench", "videoreasonbench",
    "longvideo_reason", "ovobench", "odvbench", "livesports3k", "videommlu",
}  # fmt: skip


def test_all_22_benchmarks_are_registered() -> None:
    # plus `evr1_data`: evr1-train's own rows (a run's held-out split), scored as the trainer validates
    assert set(available_benchmarks()) == EXPECTED | {"evr1_data"}


@pytest.mark.parametrize(
    ("alias", "name"),
    [("holmes", "video_holmes"), ("livesports3k_qa", "livesports3k"), ("mmvu-mc", "mmvu"), ("longvideoreason",
     "longvideo_reason"), ("mlvu-test", "mlvu")],
)  # fmt: skip
def test_easyvideor1_keys_are_aliases(alias: str, name: str) -> None:
    assert get_benchmark(alias).name == name


def test_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(KeyError, match="did you mean 'vsibench'"):
        get_benchmark("vsi-bench")
    with pytest.raises(KeyError, match="evr1-eval list"):
        get_benchmark("zzzzzz")


def test_duplicates_are_refused_without_touching_the_registry() -> None:
    bench = get_benchmark("videomme")
    with pytest.raises(ValueError, match="already registered"):
        register(bench)
    with pytest.raises(ValueError, match="'holmes' is already registered"):
        register(dataclasses.replace(bench, name="brand_new_bench", aliases=("holmes",)))
    assert "brand_new_bench" not in available_benchmarks()
    assert get_benchmark("videomme") is bench


def test_declarations_are_frozen_and_sampling_is_a_cache_spec() -> None:
    bench = get_benchmark("charades_sta")
    with pytest.raises(dataclasses.FrozenInstanceError):
        bench.name = "x"  # type: ignore[misc]
    spec = bench.sampling
    assert isinstance(spec, SamplingSpec)
    assert (spec.fps, spec.max_frames) == (2.0, 128)
    assert get_benchmark("lvbench").sampling.max_frames == 768
    for name in available_benchmarks():
        b = get_benchmark(name)
        assert b.problem_types
        assert b.judged_types <= set(b.problem_types) | {"open-ended"}
        assert b.needs_judge == bool(b.judged_types | b.judge_fallback_types)
