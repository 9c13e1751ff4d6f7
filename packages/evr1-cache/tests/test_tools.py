"""The agent tool layer: get_frames / zoom served from the cache, validation, budgets, the registry, call parsing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evr1_cache import CacheReader, MediaLoader, decode_video
from evr1_cache.spec import SamplingSpec, sample_frame_indices
from evr1_cache.testing import make_synthetic_video, read_frame_index
from evr1_cache.tools import (
    HERMES,
    ToolBudget,
    ToolCall,
    ToolConfig,
    ToolContext,
    ToolError,
    ToolMedia,
    ToolResult,
    ToolSession,
    call_format,
    check_arguments,
    get_tool,
    register_tool,
    tool_names,
    tool_schemas,
)
from evr1_cache.tools.registry import TOOLS
from evr1_cache.tools.schema import SchemaError

CONFIG = ToolConfig(
    fps=5.0, frame_max_pixels=64 * 28 * 28, zoom_fps=2.0, zoom_min_pixels=128 * 28 * 28, zoom_max_pixels=256 * 28 * 28
)


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 s at 10 fps, 224x168: frame i shows i."""
    return make_synthetic_video(tmp_path_factory.mktemp("agent") / "long.mp4", 80, 10.0, (224, 168), gop=10)


@pytest.fixture
def source(tmp_path: Path) -> MediaLoader:
    return MediaLoader(tmp_path / "cache", write_cache=True)


def session(clip: Path, source: MediaLoader, **budget: int) -> ToolSession:
    return ToolSession(clip, source, config=CONFIG, budget=ToolBudget(**budget))


def call(name: str, **args: Any) -> str:
    return HERMES.render_call(ToolCall(name, args))


def test_get_frames_serves_the_window_at_the_spec_rule_and_caches_it(long_clip: Path, source: MediaLoader) -> None:
    s = session(long_clip, source)
    turn = s.answer("Let me look. " + call("get_frames", start=2.0, end=4.0, n=6))
    (result,) = turn.results
    assert result.ok, result.text
    (media,) = result.media
    assert media.kind == "video"
    assert media.frames.shape[0] == 6
    # the stream is the video at 5 fps (the cache entry of frames_spec); six of its frames in 2-4 s are picked by the
    # spec's own linspace rule
    stream = [i for i in sample_frame_indices(80, 10.0, CONFIG.frames_spec()) if 20 <= i <= 40]
    want = [stream[k] for k in sample_frame_indices(len(stream), 5.0, SamplingSpec(nframes=6, fps=None))]
    assert [read_frame_index(f) for f in media.frames] == want
    assert media.timestamps == pytest.approx([i / 10.0 for i in want])
    assert media.meta is not None
    assert list(media.meta.frames_indices) == [i - want[0] for i in want]
    assert media.meta.total_num_frames == want[-1] - want[0] + 1  # the clip's own timing (a processor's rate)
    assert result.text.endswith(", ".join(f"{t:.2f}" for t in media.timestamps) + " s")
    # computed once, then served from the cache: the entry exists and holds what a decode of that spec gives
    assert source.cache_dir is not None
    reader = CacheReader(source.cache_dir)
    assert reader.contains(long_clip, CONFIG.frames_spec())
    decoded, _ = decode_video(long_clip, CONFIG.frames_spec())
    cached, _ = reader.load(long_clip, CONFIG.frames_spec())
    np.testing.assert_array_equal(decoded, cached)
    stat = reader.path_for(long_clip, CONFIG.frames_spec()).stat().st_mtime_ns
    s.answer(call("get_frames", start=0.0, end=1.0))
    assert reader.path_for(long_clip, CONFIG.frames_spec()).stat().st_mtime_ns == stat  # reused, not rebuilt


def test_get_frames_fps_and_default(long_clip: Path, source: MediaLoader) -> None:
    s = session(long_clip, source, frames_per_call=8)
    (by_fps,) = s.answer(call("get_frames", start=0.0, end=4.0, fps=2.0)).results
    assert by_fps.ok
    assert len(by_fps.media[0].timestamps) == 8
    (default,) = s.answer(call("get_frames", start=0.0, end=6.0)).results
    assert default.ok
    assert len(default.media[0].timestamps) == 8


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"start": 3.0, "end": 2.0}, "must be after start"),
        ({"start": 1.0, "end": 30.0}, "ends after the video"),
        ({"start": -1.0, "end": 2.0}, "must be >= 0"),
        ({"start": "a", "end": 2.0}, "must be a number"),
        ({"start": 1.0}, "missing argument 'end'"),
        ({"start": 1.0, "end": 2.0, "frames": 3}, "unknown argument"),
        ({"start": 1.0, "end": 2.0, "n": 40}, "above the 16 frames"),
        ({"start": 1.0, "end": 2.0, "fps": 50.0}, "fps must be in"),
        ({"start": 1.0, "end": 2.0, "fps": 2.0, "n": 4}, "either fps or n"),
        ({"start": 1.0, "end": 1.1}, "widen it"),
    ],
)
def test_get_frames_bad_calls_are_answered_not_raised(
    long_clip: Path, source: MediaLoader, args: dict[str, Any], message: str
) -> None:
    s = session(long_clip, source)
    (result,) = s.answer(call("get_frames", **args)).results
    assert not result.ok
    assert message in str(result.error)
    assert result.text.startswith("Error: ")
    assert result.media == ()
    assert s.stats.invalid == 1
    assert s.stats.served == 0


def test_zoom_crops_at_a_higher_resolution(long_clip: Path, source: MediaLoader) -> None:
    s = session(long_clip, source)
    (result,) = s.answer(call("zoom", time=3.2, box=[0.0, 0.0, 0.5, 0.5])).results
    assert result.ok, result.text
    (media,) = result.media
    got = source.frames(long_clip, CONFIG.detail_spec())
    detail, meta = got.frames, got.meta  # the 2 fps detail stream it crops from
    k = min(range(len(meta.timestamps)), key=lambda i: abs(meta.timestamps[i] - 3.2))
    assert media.kind == "image"
    assert media.timestamps == (meta.timestamps[k],)
    assert abs(meta.timestamps[k] - 3.2) <= 0.5 / CONFIG.zoom_fps + 0.05
    h, w, _ = media.frames.shape
    assert h * w > CONFIG.frame_max_pixels  # above the per-frame budget of the frames stream
    assert h % 28 == 0
    assert w % 28 == 0
    assert CONFIG.zoom_min_pixels <= h * w <= CONFIG.zoom_max_pixels
    # the crop is the top-left quarter of that frame: its mean brightness is the quarter's, not the frame's
    quarter = detail[k][: detail.shape[1] // 2, : detail.shape[2] // 2].astype(float).mean()
    other = detail[k][detail.shape[1] // 2 :, detail.shape[2] // 2 :].astype(float).mean()
    assert abs(float(media.frames.mean()) - quarter) < 6 < abs(quarter - other)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"time": 99.0, "box": [0, 0, 1, 1]}, "after the video's end"),
        ({"time": 1.0, "box": [0.5, 0.5, 0.2, 0.9]}, "x0 < x1"),
        ({"time": 1.0, "box": [0, 0, 1.5, 1]}, "must be <= 1"),
        ({"time": 1.0, "box": [0, 0, 1]}, "at least 4 items"),
        ({"time": 1.0, "box": [0.5, 0.5, 0.501, 0.502]}, "widen it"),
    ],
)
def test_zoom_bad_calls(long_clip: Path, source: MediaLoader, args: dict[str, Any], message: str) -> None:
    (result,) = session(long_clip, source).answer(call("zoom", **args)).results
    assert not result.ok
    assert message in str(result.error)


def test_budgets_calls_per_turn_per_episode_and_pixels(long_clip: Path, source: MediaLoader) -> None:
    s = session(long_clip, source, calls_per_turn=1, calls_per_episode=2)
    two = s.answer(call("get_frames", start=0, end=1) + call("get_frames", start=1, end=2))
    assert [r.ok for r in two.results] == [True, False]
    assert "per turn" in str(two.results[1].error)
    assert s.answer(call("get_frames", start=2, end=3)).results[0].ok is False  # 2 calls used (one refused)
    assert "used up" in str(s.answer(call("get_frames", start=2, end=3)).results[0].error)
    stream = source.frames(long_clip, CONFIG.frames_spec()).frames
    frame = stream.shape[1] * stream.shape[2]  # pixels of one served frame: a budget of 3 frames refuses 4
    tight = session(long_clip, source, pixels_per_episode=3 * frame)
    refused = tight.answer(call("get_frames", start=0, end=2, n=4)).results[0]
    assert not refused.ok
    assert "pixels" in str(refused.error)
    assert tight.stats.pixels == 0
    served = tight.answer(call("get_frames", start=0, end=2, n=2)).results[0]
    assert served.ok
    assert tight.stats.pixels == served.pixels == 2 * frame
    assert not tight.answer(call("get_frames", start=0, end=2, n=2)).results[0].ok  # 1 frame's pixels left


def test_unknown_tool_and_malformed_calls_are_counted(long_clip: Path, source: MediaLoader) -> None:
    s = ToolSession(long_clip, source, tools=("get_frames",), config=CONFIG)
    text = (
        '<tool_call>{"name": "zoom", "arguments": {"time": 1, "box": [0,0,1,1]}}</tool_call>'  # not enabled here
        "<tool_call>{not json}</tool_call>"
        '<tool_call>{"arguments": {}}</tool_call>'
        "</tool_call> stray <tool_call>[1, 2]</tool_call>"
        '<tool_call>{"name": "get_frames", "arguments": {"start": 0, "end": 1}'  # never closed
    )
    turn = s.answer(text)
    assert not turn.final
    assert len(turn.parsed.errors) == 5
    assert s.stats.malformed == 5
    assert [r.ok for r in turn.results] == [False] * 6
    assert "available: get_frames" in str(turn.results[-1].error)
    record = json.loads(json.dumps(s.record()))
    assert record["stats"]["malformed"] == 5
    assert len(record["turns"][0]["calls"]) == 6
    final = s.answer("The answer is B.")
    assert final.final
    assert final.results == ()
    assert final.parsed.content == "The answer is B."


def test_parser_accepts_string_arguments_and_keeps_content() -> None:
    parsed = HERMES.parse('Hmm <tool_call>\n{"name": "zoom", "arguments": "{\\"time\\": 1}"}\n</tool_call> ok')
    assert parsed.calls == (ToolCall("zoom", {"time": 1}),)
    assert parsed.content == "Hmm  ok"
    assert not parsed.errors
    assert HERMES.parse("<tool_call>" + "1" * 5000 + "</tool_call>").errors[0].message.startswith("a tool call longer")
    assert HERMES.parse("[" * 100000 + "]" * 100000).calls == ()  # no tag: plain text, never parsed as JSON
    deep = HERMES.parse("<tool_call>" + "[" * 3000 + "</tool_call>")
    assert len(deep.errors) == 1


def test_call_formats_by_family() -> None:
    assert call_format("qwen2_5_vl") is HERMES
    assert call_format("qwen3_vl") is HERMES
    assert call_format(None) is HERMES
    with pytest.raises(KeyError, match="did you mean 'qwen3_vl'"):
        call_format("qwen3_vll")
    text = HERMES.system_text(tool_schemas(["get_frames", "zoom"]))
    assert '"name": "get_frames"' in text
    assert "<tool_call>" in text


def test_registry_users_add_tools(long_clip: Path, source: MediaLoader) -> None:
    def duration(ctx: ToolContext, args: Mapping[str, Any]) -> ToolResult:
        if args["unit"] == "ms":
            raise ToolError("milliseconds are not offered")
        return ToolResult("duration", dict(args), f"{ctx.meta().duration:.1f} s")

    schema = {"type": "object", "properties": {"unit": {"type": "string", "enum": ["s", "ms"]}}, "required": ["unit"]}
    register_tool("video_duration", "The video's length.", schema)(duration)
    try:
        assert "video_duration" in tool_names()
        assert get_tool("video_duration").schema()["function"]["name"]
        s = ToolSession(long_clip, source, tools=("video_duration",), config=CONFIG)
        assert s.answer(call("video_duration", unit="s")).results[0].text == "8.0 s"
        assert "not offered" in str(s.answer(call("video_duration", unit="ms")).results[0].error)
        assert "must be one of" in str(s.answer(call("video_duration", unit="h")).results[0].error)
        with pytest.raises(ValueError, match="already registered"):
            register_tool("video_duration", "again", schema)(duration)
    finally:
        TOOLS.pop("video_duration", None)
    with pytest.raises(KeyError, match="did you mean 'zoom'"):
        get_tool("zom")
    with pytest.raises(ValueError, match="unsupported keyword"):
        register_tool("bad", "x", {"type": "object", "pattern": "a"})(duration)
    with pytest.raises(KeyError, match="unknown tool"):
        ToolSession(long_clip, source, tools=("get_frame",))


def test_schema_checker() -> None:
    schema = get_tool("get_frames").parameters
    check_arguments(schema, {"start": 0, "end": 1.5, "n": 4})
    for bad in ({"start": True, "end": 1}, {"start": 0, "end": float("nan")}, {"start": 0, "end": 1, "n": 2.5}, []):
        with pytest.raises(SchemaError):
            check_arguments(schema, bad)


def test_tool_media_pixels() -> None:
    media = ToolMedia("video", np.zeros((4, 28, 56, 3), np.uint8), (0.0, 1.0, 2.0, 3.0))
    assert media.pixels == 4 * 28 * 56
    assert ToolMedia("image", np.zeros((28, 56, 3), np.uint8), (0.0,)).pixels == 28 * 56


def test_unreadable_video_is_an_error_answer(tmp_path: Path, source: MediaLoader) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video")
    (result,) = ToolSession(bad, source, config=CONFIG).answer(call("get_frames", start=0, end=1)).results
    assert not result.ok
    assert "cannot be read" in str(result.error)


def test_budget_and_config_validation() -> None:
    with pytest.raises(ValueError, match="frames_per_call"):
        ToolBudget(frames_per_call=0)
    with pytest.raises(
        ValueError, match=r"unknown ToolBudget keys \[.frame_per_call.\] \(did you mean .frames_per_call.\?\)"
    ):
        ToolBudget.from_mapping({"frame_per_call": 3})
    with pytest.raises(ValueError, match="fps"):
        ToolConfig(fps=-1.0)


def test_split_turns_of_a_stored_trajectory() -> None:
    a = call("get_frames", start=0, end=1)
    b = call("zoom", time=1, box=[0, 0, 1, 1])
    assert HERMES.split_turns(f"look {a} closer {a}\n{b} <answer>B</answer>") == [
        f"look {a}",
        f" closer {a}\n{b}",
        "<answer>B</answer>",
    ]
    assert HERMES.split_turns("<answer>B</answer>") == ["<answer>B</answer>"]
    assert HERMES.split_turns(f"only {a}") == [f"only {a}"]
    for text in (f"look {a} closer {a}\n{b} <answer>B</answer>", f"x {a}"):
        assert "".join(HERMES.split_turns(text)).replace(" ", "") == text.replace(" ", "")


def test_docs_tool_example_runs(long_clip: Path, source: MediaLoader) -> None:
    """docs/agents.md's "Defining a tool" block, run as written."""
    import re

    docs = Path(__file__).resolve().parents[3] / "docs" / "agents.md"
    (block,) = re.findall(r"```python\n(.*?)```", docs.read_text(), flags=re.S)
    scope: dict[str, Any] = {}
    try:
        exec(compile(block, str(docs), "exec"), scope)
        s = ToolSession(long_clip, source, tools=("get_frames", "video_length"), config=CONFIG)
        assert s.answer(call("video_length", unit="s")).results[0].text == "8.0 s"
        assert "shorter than a minute" in str(s.answer(call("video_length", unit="min")).results[0].error)
    finally:
        TOOLS.pop("video_length", None)
