"""`evr1_train.parity` without engines: the dump format (safetensors + JSON, refuses foreign files) and the checks
(each one fails on the difference it exists for: a token, a placeholder position, a grid, a timestamp, a pixel, a
log-prob)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from evr1_train.parity import (
    LOGPROB_TOLERANCE_BF16,
    LOGPROB_TOLERANCE_FP32,
    SideRecord,
    compare_sides,
    max_logprob_diff,
    read_dump,
    table,
    write_dump,
)
from evr1_train.parity.cli import main


def _rec(side: str, **kw: object) -> SideRecord:
    base: dict[str, object] = {
        "sample": "v0",
        "side": side,
        "family": "qwen3_vl",
        "prompt_ids": (1, 2, 9, 9, 9, 3),
        "placeholder_ids": (9,),
        "grids": {"video_grid_thw": [[2, 2, 4]]},
        "timing": {"frame_seconds": [0.25, 1.25]},
        "pixels": {"pixel_values_videos": np.arange(12, dtype=np.float32).reshape(3, 4)},
        "response_ids": (5, 6),
        "logprobs": (-1.0, -2.0),
        "info": {"dtype": "float32", "frames": "abc"},
    }
    base.update(kw)
    return SideRecord(**base)  # type: ignore[arg-type]


def test_dump_round_trip_is_exact_and_pickle_free(tmp_path: Path) -> None:
    records = [_rec("hf"), _rec("hf", sample="i2", pixels={}, grids={}, timing={})]
    path = write_dump(tmp_path / "d" / "hf.safetensors", records)
    back = read_dump(path)
    assert [r.sample for r in back] == ["v0", "i2"]
    assert back[0].prompt_ids == records[0].prompt_ids
    assert back[0].timing == records[0].timing
    np.testing.assert_array_equal(back[0].pixels["pixel_values_videos"], records[0].pixels["pixel_values_videos"])
    assert back[1].pixels == {}
    assert b"pickle" not in path.read_bytes()[:200]
    (tmp_path / "foreign.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    with pytest.raises(ValueError, match=r"foreign\.safetensors"):
        read_dump(tmp_path / "foreign.safetensors")


@pytest.mark.parametrize("bad", [(math.nan, -2.0), (-1.0, math.nan), (-1.0, -math.inf), (1e31, -2.0)])
def test_non_finite_or_absurd_logprobs_are_dumped_and_fail(tmp_path: Path, bad: tuple[float, float]) -> None:
    """An engine that returns NaN / inf log-probs (vLLM's CPU GLM-4.5V MoE did) is reported, never crashes the dump
    and never passes: max() over differences would skip a NaN that is not first."""
    path = write_dump(tmp_path / "vllm.safetensors", [_rec("vllm", logprobs=bad)])
    (back,) = read_dump(path)
    assert len(back.logprobs) == 2
    assert [math.isnan(v) for v in back.logprobs] == [math.isnan(v) for v in bad]
    (res,) = compare_sides({"hf": [_rec("hf")], "vllm": [back]})
    lp = res.check("logprobs")
    assert lp is not None
    assert not lp.ok, lp.detail
    assert not res.ok


def test_identical_sides_pass_and_each_difference_fails() -> None:
    assert all(r.ok for r in compare_sides({"hf": [_rec("hf")], "vllm": [_rec("vllm")]}))
    cases = {
        "tokens": {"prompt_ids": (1, 2, 9, 9, 9, 4)},
        "placeholder": {"prompt_ids": (1, 9, 2, 9, 9, 3)},
        "length": {"prompt_ids": (1, 2, 9, 9, 3)},
        "grids": {"grids": {"video_grid_thw": [[2, 4, 2]]}},
        "timing": {"timing": {"frame_seconds": [0.25, 1.75]}},
        "pixels": {"pixels": {"pixel_values_videos": np.arange(12, dtype=np.float32).reshape(3, 4) + 1e-3}},
        "logprobs": {"logprobs": (-1.0, -2.0 - 2 * LOGPROB_TOLERANCE_FP32)},
        "family": {"family": "glm4v"},
    }
    for what, change in cases.items():
        (res,) = compare_sides({"hf": [_rec("hf")], "vllm": [_rec("vllm", **change)]})
        assert not res.ok, what
    missing = compare_sides({"hf": [_rec("hf"), _rec("hf", sample="v1")], "vllm": [_rec("vllm")]})
    assert [r.ok for r in missing] == [True, False]
    assert "no record on vllm" in table(missing)


def test_placeholders_may_differ_in_id_but_not_in_position() -> None:
    # vLLM's InternVL fills <video> (id 7) where transformers fills <IMG_CONTEXT> (id 9)
    vllm = _rec("vllm", prompt_ids=(1, 2, 7, 7, 7, 3), placeholder_ids=(7,))
    (res,) = compare_sides({"hf": [_rec("hf")], "vllm": [vllm]})
    assert res.ok
    assert "placeholder ids [9] vs [7]" in res.check("tokens").detail


def test_bfloat16_pixels_may_differ_by_bfloat16_rounding_only() -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    rounded = (x.view(np.uint32) + 0x8000 & 0xFFFF0000).view(np.float32)  # float32 -> bfloat16 -> float32
    bf16 = {"dtype": "bfloat16", "frames": "abc"}
    (ok,) = compare_sides(
        {"hf": [_rec("hf", pixels={"p": x})], "vllm": [_rec("vllm", pixels={"p": rounded}, info=bf16)]}
    )
    assert ok.check("pixels").ok
    (fp32,) = compare_sides({"hf": [_rec("hf", pixels={"p": x})], "vllm": [_rec("vllm", pixels={"p": rounded})]})
    assert not fp32.check("pixels").ok  # the same difference is a mismatch between two float32 sides
    (off,) = compare_sides(
        {"hf": [_rec("hf", pixels={"p": x})], "vllm": [_rec("vllm", pixels={"p": x + 0.02}, info=bf16)]}
    )
    assert not off.check("pixels").ok


def test_bfloat16_sides_get_the_wider_tolerance() -> None:
    lp = (-1.0, -2.0 - 0.5 * LOGPROB_TOLERANCE_BF16)
    (fp32,) = compare_sides({"hf": [_rec("hf")], "vllm": [_rec("vllm", logprobs=lp)]})
    bf16 = _rec("vllm", logprobs=lp, info={"dtype": "bfloat16", "frames": "abc"})
    (mixed,) = compare_sides({"hf": [_rec("hf")], "vllm": [bf16]})
    assert not fp32.ok
    assert mixed.ok
    assert max_logprob_diff([mixed]) == pytest.approx(0.5 * LOGPROB_TOLERANCE_BF16)


def test_the_command_compares_dumps_and_exits_non_zero_on_a_mismatch(tmp_path: Path, capsys) -> None:
    good, bad = tmp_path / "a" / "hf.safetensors", tmp_path / "b" / "vllm.safetensors"
    write_dump(good, [_rec("hf")])
    write_dump(bad, [_rec("vllm")])
    assert main(["--compare", str(good), str(bad)]) == 0
    assert "1 comparisons, 0 with a mismatch" in capsys.readouterr().out
    write_dump(bad, [dataclasses.replace(_rec("vllm"), timing={"frame_seconds": [0.25, 2.0]})])
    assert main(["--compare", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out
    assert "timing" in out
    with pytest.raises(SystemExit):
        main(["--data", "x"])  # --model / --cache-dir missing
    with pytest.raises(SystemExit):
        main(["--model", "m", "--data", "d", "--cache-dir", "c", "--sides", "verl,sglang"])


def test_a_side_whose_engine_is_missing_exits_2_with_the_split_run_recipe(tmp_path: Path, monkeypatch, capsys) -> None:
    import builtins

    from evr1_train.parity import cli

    real_import = builtins.__import__

    def no_vllm(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("vllm"):
            raise ImportError("No module named 'vllm'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    with pytest.raises(SystemExit) as exc:
        cli.run_sides("model", object(), ["vllm"], logprobs=False, vllm_dtype="float32", max_model_len=64)
    assert exc.value.code == 2
    assert "--sides vllm --dump DIR" in capsys.readouterr().err
