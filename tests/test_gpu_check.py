"""benchmarks/gpu_check.py's stdlib half: the JSON schema, the stage plan against the lease, the published shapes.

The full check (prepare + every stage at tiny shapes on CPU) runs in the `gpu_check_cpu` nox session, which also
validates the JSON it writes with `validate`; these tests make sure `validate` rejects what it must.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("evr1_gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


gpu = _load()

PHASES = {"data": 1.0, "rollout": 2.0, "log_prob": 1.5, "update": 4.0, "step": 8.5}
MEASURED = {"setting": "full", "status": "ok", "predicted_gib": 40.0, "measured_gib": 38.0, "ratio": 1.05,
            "activations_predicted_gib": 10.0, "activations_measured_gib": 9.0, "phase_peak_gib": {"update": 38.0}}  # fmt: skip


def good() -> dict[str, Any]:
    train = {"model": "qwen3_vl_2b", "parameters": {"total": 2}, "timing_setting": "full", "cached": dict(PHASES),
             "decoded": {**PHASES, "data": 3.0}, "ratio": {}, "tokens_per_s": {"cached": 1.0, "decoded": 0.5},
             "memory": [dict(MEASURED), {"setting": "lora", "status": "skipped", "predicted_gib": 200.0, "reason": "x"}]}  # fmt: skip
    return {
        "schema": 1, "date_utc": "2026-12-02T00:00:00Z", "mode": "full", "machine": "x86_64", "cpus": 16,
        "load_average": 0.5, "budget_s": 540.0, "total_s": 500.0, "workload": gpu.GPU_WORKLOAD.record(),
        "payload": {"total": 2**20, "limit": 64 * 2**20}, "stages": [
            {"name": "setup", "estimate_s": 20.0, "wall_s": 10.0, "status": "ok", "result": {
                "python": "3.12", "torch": "2.11", "cuda": "13.0", "gpu": "H200", "gpu_memory_gib": 139.8,
                "transformers": "5.9", "peft": "0.21", "attention": "sdpa", "attention_note": "fallback"}},
            {"name": "cache", "estimate_s": 25.0, "wall_s": 20.0, "status": "ok",
             "result": {"videos": [], "frames": {}, "build_s": 3}},
            {"name": "train_2b", "estimate_s": 100.0, "wall_s": 90.0, "status": "ok", "result": train},
            {"name": "eval_2b", "estimate_s": 50.0, "wall_s": 40.0, "status": "ok", "result": {
                "model": "qwen3_vl_2b", "samples": 6, "cached_s": 10.0, "decoded_s": 15.0, "ratio": 1.5}},
            {"name": "train_4b", "estimate_s": 200.0, "wall_s": 0.0, "status": "skipped", "reason": "over budget"},
        ],
    }  # fmt: skip


def test_a_complete_result_matches_the_schema_and_renders() -> None:
    summary = good()
    assert gpu.validate(json.loads(json.dumps(summary))) == []
    table = gpu.render(summary)
    assert "| update | 4.000 | 4.000 | 1.00x |" in table
    assert "| data | 1.000 | 3.000 | 3.00x |" in table
    assert "| train_4b | skipped | 200 | 0 | over budget |" in table


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("stages", 0, "result", "gpu"), None, "$.stages[0].result: missing 'gpu'"),
        (("stages", 2, "result", "cached", "update"), "4", "$.stages[2].result.cached.update"),
        (("stages", 2, "result", "memory", 0, "measured_gib"), None, "memory[0]: missing 'measured_gib'"),
        (("stages", 2, "result", "memory", 1, "reason"), None, "memory[1]: a setting that did not run says why"),
        (("stages", 3, "status"), "done", "is not one of"),
        (("stages", 4, "reason"), None, "says why"),
        (("load_average",), True, "$.load_average"),
    ],
)
def test_a_broken_result_is_reported_where_it_breaks(path: tuple[Any, ...], value: Any, message: str) -> None:
    summary = copy.deepcopy(good())
    target = summary
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    problems = gpu.validate(summary)
    assert problems, summary
    assert any(message in p for p in problems), problems


def test_the_planned_gpu_stages_fit_the_lease_up_to_the_8b_one() -> None:
    """2B + eval + 8B fit the 9-minute run; 4B comes last and runs only if time is left."""
    stages = gpu.plan(gpu.GPU_WORKLOAD, list(gpu.MODELS))
    names = [s.name for s in stages]
    assert names == ["setup", "cache", "train_2b", "eval_2b", "train_8b", "train_4b"]
    assert sum(s.estimate_s for s in stages[:-1]) <= gpu.GPU_BUDGET_S
    assert gpu.GPU_BUDGET_S <= 9 * 60


def test_the_shapes_are_the_published_sizes() -> None:
    """Parameter counts of the config dicts against the published totals (2.13B, 4.44B, 8.77B), within 1%."""
    published = {"qwen3_vl_2b": 2.13e9, "qwen3_vl_4b": 4.44e9, "qwen3_vl_8b": 8.77e9}
    for name, total in published.items():
        counts = gpu.parameter_count(gpu.MODELS[name])
        assert abs(counts["language"] + counts["vision"] - total) / total < 0.01, (name, counts)


def test_the_seed_budget_is_read_from_the_preset() -> None:
    budget = gpu.seed_video_budget()
    assert budget == {"size_factor": 32, "min_pixels": 131072, "max_pixels": 786432, "total_pixels": 25165824}
    # 256 frames at that budget: 128 pairs x (196608 px / 1024 px per token)
    assert gpu.video_tokens(256, gpu.MODELS["qwen3_vl_8b"]) == 128 * 192


def test_the_payload_counts_the_tree_and_the_carried_folder(tmp_path: Path) -> None:
    (tmp_path / "a.whl").write_bytes(b"x" * 1000)
    size = gpu.payload_bytes(tmp_path)
    assert size["carried"] == 1000
    assert size["total"] == size["tree"] + 1000
    assert size["limit"] == 64 * 2**20
    assert size["tree"] > 0
