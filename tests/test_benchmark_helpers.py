"""The pure helpers of the benchmark scripts (no engine, no torch): what makes their comparisons fair and their summaries
right. The timings themselves are never asserted (benchmarks print ratios; tests do not time anything)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"evr1_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pipeline() -> types.ModuleType:
    return _script("eval_pipeline")


def test_long_tailed_lengths_are_seeded_clipped_and_long_tailed(pipeline: types.ModuleType) -> None:
    ids = [f"s{i}" for i in range(2000)]
    model = pipeline.LengthModel("long-tailed", median=96, sigma=1.0, low=16, high=1536)
    first, again = model.draw(ids, seed=0), model.draw(ids, seed=0)
    assert first == again  # every mode (and every rerun) forces the same lengths
    assert first != model.draw(ids, seed=1)
    values = sorted(first.values())
    assert values[0] >= 16
    assert values[-1] <= 1536
    assert 80 <= values[len(values) // 2] <= 115  # the median is where it was asked to be
    assert sum(values) / len(values) > 1.3 * values[len(values) // 2]  # a long right tail: mean well above median
    assert pipeline.LengthModel("uniform", 16).draw(ids[:3], seed=0) == {"s0": 16, "s1": 16, "s2": 16}


def test_step_bound_counts_each_batch_at_its_longest_answer(pipeline: types.ModuleType) -> None:
    d = pipeline.describe_lengths([10, 1, 1, 1] * 4, batch=4)
    assert d["fixed_steps"] == 4 * 10  # each fixed batch lasts as long as its longest answer
    assert d["stream_steps"] == 13  # ceil(52 / 4): streaming keeps all 4 slots busy
    assert (d["total"], d["max"]) == (52, 10)
    one = pipeline.describe_lengths([30, 1, 1, 1], batch=4)
    assert one["fixed_steps"] == one["stream_steps"] == 30  # one batch: nothing to overlap, no gain to expect


def test_forced_lengths_reach_the_engine_per_request(pipeline: types.ModuleType) -> None:
    from evr1_eval.backends import GenerationParams, Request

    seen: dict[str, Any] = {}

    class Engine:
        name = "recorder"

        async def generate(self, request: Any, params: Any) -> Any:
            seen[request.id] = params
            return params.max_tokens

    forced = pipeline.ForcedLengths(Engine(), {"a": 3, "b": 700})
    base = GenerationParams(max_tokens=1536, temperature=0.0)
    for rid in ("a", "b"):
        asyncio.run(forced.generate(Request(id=rid, prompt="?"), base))
    assert (seen["a"].max_tokens, seen["a"].min_tokens, seen["a"].ignore_eos) == (3, 3, True)
    assert (seen["b"].max_tokens, seen["b"].min_tokens) == (700, 700)
    assert seen["b"].temperature == base.temperature  # only the length changes
    pipeline.check_lengths("c", {"a": 3, "b": 700}, {"a": 3, "b": 700})
    with pytest.raises(SystemExit, match="differ from the forced lengths"):
        pipeline.check_lengths("b", {"a": 3, "b": 699}, {"a": 3, "b": 700})


def test_gpu_check_ray_stand_in_fails_loudly_on_any_real_use() -> None:
    gpu_check = _script("gpu_check")
    ray = types.ModuleType("ray")
    exec(compile(gpu_check.RAY_STAND_IN, "ray/__init__.py", "exec"), ray.__dict__)
    assert list[ray.ObjectRef]  # the annotation verl.protocol evaluates at import time
    with pytest.raises(RuntimeError, match="stand-in"):
        ray.ObjectRef()
    for name in ("init", "remote", "get", "put"):
        with pytest.raises(AttributeError, match="stand-in"):
            getattr(ray, name)


def _pipeline_run(seconds: int, frames_a: float, wall_a: float, wall_c: float, precompute: float) -> dict[str, Any]:
    timing = {"wall_s": {"a": [wall_a], "c": [wall_c]}, "load_s": {"a": [frames_a], "c": [0.1]}}
    return {"clip_seconds": seconds, "precompute_s": precompute, "workloads": {"uniform": timing}}


def test_eval_pipeline_scaling_model_grows_with_clip_length_and_questions(pipeline: types.ModuleType) -> None:
    parts = pipeline.scaling_parts(
        _pipeline_run(300, frames_a=60.0, wall_a=100.0, wall_c=20.0, precompute=30.0), "uniform"
    )
    assert parts == {"frames_a": 60.0, "engine_a": 40.0, "wall_c": 20.0, "precompute": 30.0}
    assert pipeline.modeled_ratio(parts, 1.0, 1.0, False) == pytest.approx(5.0)  # (60 + 40) / 20
    assert pipeline.modeled_ratio(parts, 0.25, 1.0, False) == pytest.approx((15 + 40) / 20)  # shorter clip: smaller
    assert pipeline.modeled_ratio(parts, 4.0, 1.0, False) == pytest.approx((240 + 40) / 20)
    assert pipeline.modeled_ratio(parts, 1.0, 1.0, True) == pytest.approx(100 / 50)  # precompute counted
    assert pipeline.modeled_ratio(parts, 1.0, 4.0, True) == pytest.approx(100 / 27.5)  # shared by 4x the questions


def test_eval_pipeline_prints_the_ratio_for_every_timed_length(pipeline: types.ModuleType, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    runs = [_pipeline_run(60, 12.0, 52.0, 20.0, 6.0), _pipeline_run(300, 60.0, 100.0, 20.0, 30.0)]
    pipeline.print_scaling(runs, 20)
    out = capsys.readouterr().out
    assert "| uniform | 60 | 2.60x | 2.60x |" in out  # measured (12 + 40) / 20 and the model from the 300 s run
    assert "| uniform | 300 | 5.00x | 5.00x |" in out
    assert "| uniform | 1200 | - | 14.00x |" in out  # modeled only
