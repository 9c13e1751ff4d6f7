"""The planner on real files: probe-based plans equal what `build` caches, over-limit rows are named, `build --plan`
drops or resamples them with a reason per row, and the memory estimate reads real configs.

Exact text counts against the processors are in test_plan_parity.py (they need transformers)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evr1_cache.build import build_cache
from evr1_cache.cli import main
from evr1_cache.dataset import read_rows
from evr1_cache.families import get_family
from evr1_cache.plan import (
    PLAN_COLUMN,
    ModelShape,
    RowSpecError,
    activation_memory,
    decide,
    default_messages,
    histogram,
    over_limit,
    plan_rows,
    row_video_spec,
    shrunk_specs,
)
from evr1_cache.testing import make_synthetic_image, make_synthetic_video

#: (family, video settings, image settings, CLI flags for the same spec)
FAMILIES: dict[str, tuple[dict[str, Any], dict[str, Any], list[str]]] = {
    "qwen2_5_vl": (
        {"fps": 2.0, "min_frames": 2, "max_frames": 8, "min_pixels": 3136, "max_pixels": 12544},
        {"min_pixels": 3136, "max_pixels": 12544},
        [
            "--fps",
            "2",
            "--min-frames",
            "2",
            "--max-frames",
            "8",
            "--min-pixels",
            "3136",
            "--max-pixels",
            "12544",
            "--image-min-pixels",
            "3136",
            "--image-max-pixels",
            "12544",
        ],
    ),
    "qwen3_vl": (
        {"fps": 2.0, "min_frames": 2, "max_frames": 8, "min_pixels": 4096, "max_pixels": 16384},
        {"min_pixels": 4096, "max_pixels": 16384},
        [],
    ),
    "glm4v": ({"fps": 2.0, "min_pixels": 3136, "total_pixels": 28 * 28 * 2 * 64}, {"min_pixels": 3136}, []),
    "internvl": ({"fps": None, "nframes": 4, "size_factor": 56}, {"size_factor": 56}, []),
}
ROWS = [
    {"problem_id": "short", "problem": "<video>Colour?", "videos": ["clips/a.mp4"]},
    {"problem_id": "long", "problem": "<video>What moves?", "videos": ["clips/b.mp4"]},
    {"problem_id": "img", "problem": "<image>How many?", "images": ["img/c.png"]},
    {"problem_id": "text", "problem": "No media at all."},
]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plan")
    make_synthetic_video(root / "clips" / "a.mp4", n_frames=8, fps=8.0, size=(96, 64))
    make_synthetic_video(root / "clips" / "b.mp4", n_frames=48, fps=8.0, size=(160, 96))
    make_synthetic_image(root / "img" / "c.png", size=(80, 60))
    path = root / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def _specs(name: str) -> tuple[Any, Any]:
    fam = get_family(name)
    video, image = FAMILIES[name][:2]
    return fam.video_spec(**video), fam.image_spec(**image)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_probed_plan_equals_what_build_caches(name: str, data: Path, tmp_path: Path) -> None:
    """Planning the raw rows (packet probe) gives the frames, sizes and token counts of the built cache's VideoMeta,
    and planning the built dataset reads that metadata without probing."""
    spec, ispec = _specs(name)
    fam = get_family(name)
    raw = plan_rows(read_rows(data), name, spec, ispec, data_file=data)
    report = build_cache(data, tmp_path / "cache", spec, ispec, progress=False)
    assert report.ok, report.errors
    assert report.output_data is not None
    built_rows = read_rows(report.output_data)
    built = plan_rows(built_rows, name, spec, ispec, data_file=report.output_data)
    for r, b, row in zip(raw, built, built_rows, strict=True):
        assert r.ok, r.error
        assert b.ok, b.error
        assert (r.vision, r.total) == (b.vision, b.total)
        for m_raw, m_built, ref in zip(r.media, b.media, row["video_cache"] + row["image_cache"], strict=True):
            assert m_raw.source == "probe"
            assert m_built.source == "cache"
            if m_raw.kind == "video":
                assert list(m_raw.frames_indices) == ref["meta"]["frames_indices"]
                assert (m_raw.height, m_raw.width) == (ref["meta"]["resized_height"], ref["meta"]["resized_width"])
                assert m_raw.tokens == fam.video_tokens(len(m_raw.frames_indices), m_raw.height, m_raw.width)
            else:
                assert (m_raw.height, m_raw.width) == (ref["meta"]["height"], ref["meta"]["width"])
    assert raw[3].vision == 0
    assert raw[3].total > 0
    assert not raw[0].exact  # no tokenizer: the text side is a bound


def test_a_broken_video_is_a_row_error_not_a_crash(data: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video")
    rows = [{"problem_id": "bad", "problem": "<video>?", "videos": [str(bad)]}, ROWS[3]]
    plans = plan_rows(rows, "qwen2_5_vl", *_specs("qwen2_5_vl"))
    assert not plans[0].ok
    assert str(bad) in (plans[0].error or "")
    assert plans[1].ok


def test_plan_cli_names_the_rows_over_the_limit(data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = FAMILIES["qwen2_5_vl"][2]
    plans = plan_rows(read_rows(data), "qwen2_5_vl", *_specs("qwen2_5_vl"), data_file=data)
    limit = max(p.total for p in plans if p.row_id != "long")  # only "long" is over
    assert plans[1].total > limit
    report = tmp_path / "r.jsonl"
    args = ["plan", str(data), "--family", "qwen2_5_vl", *flags, "--max-prompt-length", str(limit)]
    rc = main([*args, "--report", str(report), "--model-size", "qwen2_5_vl_7b", "--sp", "2"])
    out = capsys.readouterr().out
    assert rc == 1
    assert f"OVER row long (line 2): {plans[1].total} tokens" in out
    assert "OVER row short" not in out
    assert "1 row(s) over --max-prompt-length" in out
    assert "memory (qwen2_5_vl_7b" in out
    assert "sp 2" in out
    lines = [json.loads(x) for x in report.read_text().splitlines()]
    assert lines[0]["summary"]["over_limit"] == 1
    assert lines[0]["memory"]["total"] > 0
    assert [x["row"] for x in lines[1:]] == ["short", "long", "img", "text"]
    assert main([*args[:-1], str(plans[1].total)]) == 0  # everything fits
    capsys.readouterr()


def test_build_plan_drops_over_long_rows_with_a_reason(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = FAMILIES["qwen2_5_vl"][2]
    plans = plan_rows(read_rows(data), "qwen2_5_vl", *_specs("qwen2_5_vl"), data_file=data)
    limit = max(p.total for p in plans if p.row_id != "long")
    out_dir = tmp_path / "cache"
    rc = main(["build", str(data), "--out", str(out_dir), "--no-progress", "--family", "qwen2_5_vl", *flags,
               "--plan", "--max-prompt-length", str(limit), "--on-over-limit", "drop"])  # fmt: skip
    assert rc == 0
    err = capsys.readouterr().err
    assert f"plan: row long (line 2): drop: prompt {plans[1].total} tokens" in err
    rows = [json.loads(x) for x in (out_dir / "train.evr1.jsonl").read_text().splitlines()]
    assert [r["problem_id"] for r in rows] == ["short", "img", "text"]
    assert all(not r["cache_errors"] for r in rows)
    report = [json.loads(x) for x in (out_dir / "plan-report.jsonl").read_text().splitlines()]
    decided = {x["row"]: x["decision"] for x in report[1:] if "decision" in x}
    assert list(decided) == ["long"]
    assert decided["long"]["action"] == "drop"
    assert f"> limit {limit}" in decided["long"]["reason"]


def test_build_plan_resamples_to_fit(data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The over-long row keeps its video with fewer frames: its entry is cached under the smaller spec, and planning
    it again under that spec gives the promised length, within the limit."""
    flags = FAMILIES["qwen2_5_vl"][2]
    spec, ispec = _specs("qwen2_5_vl")
    plans = plan_rows(read_rows(data), "qwen2_5_vl", spec, ispec, data_file=data)
    limit = plans[1].total - 1
    out_dir = tmp_path / "cache"
    rc = main(["build", str(data), "--out", str(out_dir), "--no-progress", "--family", "qwen2_5_vl", *flags,
               "--plan", "--max-prompt-length", str(limit), "--on-over-limit", "resample"])  # fmt: skip
    assert rc == 0
    assert "resample: prompt" in capsys.readouterr().err
    rows = [json.loads(x) for x in (out_dir / "train.evr1.jsonl").read_text().splitlines()]
    assert [r["problem_id"] for r in rows] == ["short", "long", "img", "text"]
    long = rows[1]
    assert long["evr1_plan"]["action"] == "resample"
    assert "resampled to" in long["evr1_plan"]["reason"]
    from evr1_cache.spec import SamplingSpec

    small = SamplingSpec(**long["evr1_plan"]["video"])
    assert small.key() != spec.key()
    assert small.max_frames < spec.max_frames
    ref = long["video_cache"][0]
    assert ref["meta"]["spec_key"] == small.key()
    assert (out_dir / ref["file"]).is_file()
    again = plan_rows([long], "qwen2_5_vl", small, ispec, data_file=out_dir / "train.evr1.jsonl")[0]
    assert again.media[0].source == "cache"
    assert again.total <= limit
    assert "spec_key" not in rows[0]
    assert rows[0]["video_cache"][0]["meta"]["spec_key"] == spec.key()
    # the row-level override: planning the built dataset under the configured spec serves the row with its own
    # spec (from its cached VideoMeta), so the whole dataset fits; the other rows keep the configured spec
    built = plan_rows(rows, "qwen2_5_vl", spec, ispec, data_file=out_dir / "train.evr1.jsonl")
    assert [p.total for p in built] == [plans[0].total, again.total, plans[2].total, plans[3].total]
    assert built[1].media[0].source == "cache"
    assert built[1].media[0].nframes < plans[1].media[0].nframes
    assert not over_limit(built, limit)
    # build --plan again on the built dataset re-decides from the configured spec (the old override is ignored)
    rc = main(["build", str(out_dir / "train.evr1.jsonl"), "--out", str(tmp_path / "again"), "--no-progress",
               "--family", "qwen2_5_vl", *flags, "--plan", "--max-prompt-length",
               str(plans[1].total), "--output-data", str(tmp_path / "again.jsonl"),
               "--allow-outside-media"])  # fmt: skip  # the built dataset's media lie outside the cache folder
    assert rc == 0
    assert [PLAN_COLUMN in json.loads(x) for x in (tmp_path / "again.jsonl").read_text().splitlines()] == [False] * 4


def test_build_plan_reserves_the_prompt_margin(data: Path, tmp_path: Path) -> None:
    """--prompt-margin M: rows must fit the limit minus M (the trainer's own prompt text comes on top)."""
    flags = FAMILIES["qwen2_5_vl"][2]
    spec, ispec = _specs("qwen2_5_vl")
    plans = plan_rows(read_rows(data), "qwen2_5_vl", spec, ispec, data_file=data)
    limit = plans[1].total  # the long row fits exactly: without a margin nothing is dropped
    out_dir = tmp_path / "cache"
    rc = main(["build", str(data), "--out", str(out_dir), "--no-progress", "--family", "qwen2_5_vl", *flags,
               "--plan", "--max-prompt-length", str(limit), "--prompt-margin", "1"])  # fmt: skip
    assert rc == 0
    rows = [json.loads(x) for x in (out_dir / "train.evr1.jsonl").read_text().splitlines()]
    assert [r["problem_id"] for r in rows] == ["short", "img", "text"]
    bad = ["build", str(data), "--out", str(out_dir), "--family", "qwen2_5_vl", *flags, "--plan",
           "--max-prompt-length", "10", "--prompt-margin", "10"]  # fmt: skip
    assert main(bad) == 2


def test_a_tampered_row_spec_is_an_error_naming_the_row(data: Path) -> None:
    """`evr1_plan` is untrusted: malformed, invalid or another family's settings name the row (planner: a row error)."""
    spec, ispec = _specs("qwen2_5_vl")
    row = {"problem_id": "bad", "problem": "<video>?", "videos": ["clips/b.mp4"]}
    small = {**spec.to_dict(), "max_frames": 4}
    assert row_video_spec({**row, PLAN_COLUMN: {"action": "resample", "video": small}}, spec).max_frames == 4
    assert row_video_spec(row, spec) is spec
    cases = {
        "must be": "resample",
        "not a valid video spec": {"action": "resample", "video": {**small, "max_frame": 3}},
        "max_frames": {"action": "resample", "video": {**small, "max_frames": -2}},
        "would not fit": {"action": "resample", "video": _specs("qwen3_vl")[0].to_dict()},
        "got {'action': 'drop'}": {"action": "drop"},
    }
    for message, plan in cases.items():
        with pytest.raises(RowSpecError, match=f"row bad: .*{re.escape(message)}"):
            row_video_spec({**row, PLAN_COLUMN: plan}, spec)
    planned = plan_rows([{**row, PLAN_COLUMN: {"action": "drop"}}], "qwen2_5_vl", spec, ispec, data_file=data)
    assert not planned[0].ok
    assert "RowSpecError: row bad" in str(planned[0].error)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_shrunk_specs_get_smaller_and_stay_valid(name: str) -> None:
    spec, _ = _specs(name)
    fam = get_family(name)
    ladder = shrunk_specs(spec, fam)
    assert ladder, name
    tokens = [fam.video_tokens(*_grid(fam, s)) for s in [spec, *ladder]]
    # fewer frames may mean larger ones under a budget over all frames (GLM-4.1V): only the end point must shrink
    assert tokens[-1] < tokens[0], (name, tokens)
    assert min(tokens) == tokens[-1], (name, tokens)


def _grid(fam: Any, spec: Any) -> tuple[int, int, int]:
    idx = fam.sample_frame_indices(600, 30.0, spec)
    h, w = fam.resized_hw(720, 1280, len(idx), spec)
    return len(idx), h, w


def test_decide_keeps_drops_and_explains(data: Path) -> None:
    spec, ispec = _specs("qwen2_5_vl")
    rows = read_rows(data)
    plans = plan_rows(rows, "qwen2_5_vl", spec, ispec, data_file=data)
    msgs = [default_messages(r) for r in rows]
    fam = get_family("qwen2_5_vl")
    tiny = 10  # nothing fits; the image and text rows cannot be resampled
    verdicts = {d.row_id: d for d in decide(plans, rows, msgs, fam, spec, ispec, tiny, "resample")}
    assert verdicts["img"].action == "drop"
    assert "no video to resample" in verdicts["img"].reason
    assert verdicts["long"].action == "drop"
    assert "smallest budget" in verdicts["long"].reason
    kept = decide(plans, rows, msgs, fam, spec, ispec, tiny, "keep")
    assert {d.action for d in kept} == {"keep"}
    with pytest.raises(ValueError, match="on_over_limit"):
        decide(plans, rows, msgs, fam, spec, ispec, tiny, "truncate")
    limit = max(p.total for p in plans if p.row_id != "long")
    assert [p.row_id for p in over_limit(plans, limit)] == ["long"]
    text = histogram(plans, bins=4, limit=limit)
    assert "<- limit" in text
    assert "(over)" in text


def test_memory_shapes_from_configs(tmp_path: Path) -> None:
    vlm = {
        "model_type": "qwen3_vl_moe",
        "text_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                        "head_dim": 16, "vocab_size": 500, "intermediate_size": 128, "num_experts_per_tok": 2,
                        "moe_intermediate_size": 32},
        "vision_config": {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "spatial_merge_size": 2},
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(vlm))
    shape = ModelShape.from_config(tmp_path)
    assert (shape.intermediate, shape.head_dim, shape.kv_heads) == (64, 16, 2)
    assert shape.vision is not None
    assert shape.vision.layers == 2
    est = activation_memory(shape, 100, vision_tokens=10)
    assert est.vision > 0
    assert est.total == est.layers + est.final + est.logprobs + est.vision
    with pytest.raises(KeyError, match="did you mean 'qwen2_5_vl_7b'"):
        ModelShape.preset("qwen2_5_vl_7")
    with pytest.raises(ValueError, match="divide"):
        activation_memory(shape, 100, sp=3)
    with pytest.raises(ValueError, match="lacks"):
        ModelShape.from_config({"model_type": "x"})
