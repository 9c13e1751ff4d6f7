"""Rows -> prompts, pixels and reward extras (the verl-free core shared by both engines), on a real frame cache."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from evr1_cache import MediaMissError
from evr1_train.data import build_prompt_text, ground_truth_of, load_media, row_messages, row_to_inputs
from evr1_train.data.row import media_items
from evr1_train.hybrid import HybridConfig


def _built_rows(video_data: dict) -> dict[str, dict]:
    rows = [json.loads(line) for line in video_data["built"].read_text().splitlines()]
    return {r["problem_id"]: r for r in rows}


def test_prompt_inserts_missing_placeholders_and_options(video_data: dict, make_opts) -> None:
    opts = make_opts()
    rows = _built_rows(video_data)
    text = build_prompt_text(rows["vv3"], opts)
    assert text.startswith("<video><video>")
    assert "Options:\nA. first\nB. second" in text
    assert "option letter" in text
    assert "<answer></answer>" in text
    assert build_prompt_text(rows["iv2"], opts).count("<image>") == 1  # given placeholders are kept, not doubled
    with pytest.raises(ValueError, match="2 <video>"):
        build_prompt_text({"problem": "<video><video>x", "videos": ["a.mp4"]}, opts)


def test_messages_keep_media_order_and_cache_refs(video_data: dict, make_opts) -> None:
    # `evr1-cache build` writes media paths relative to its output file: the default media root is that file's folder
    opts = make_opts(media_root=str(video_data["built"].parent))
    items = media_items(row_messages(_built_rows(video_data)["iv2"], opts))
    assert [i["type"] for i in items] == ["image", "video"]
    assert os.path.samefile(items[1]["video"], video_data["root"] / "clips" / "v0.mp4")
    assert items[1]["evr1_cache"]
    assert items[1]["evr1_cache"].endswith(".safetensors")


def test_cached_frames_equal_the_cache_entry_and_carry_metadata(video_data: dict, make_opts, budgets) -> None:
    from evr1_cache import CacheReader, SamplingSpec

    opts = make_opts(video_source="cache_only")
    inputs = row_to_inputs(_built_rows(video_data)["vv3"], opts, index=3)
    assert len(inputs.videos) == 2
    assert inputs.images == []
    reader = CacheReader(video_data["cache"])
    for (frames, meta), name in zip(inputs.videos, ("v0", "v1"), strict=True):
        ref, ref_meta = reader.load(video_data["root"] / "clips" / f"{name}.mp4", SamplingSpec(**budgets[0]))
        assert frames.dtype == np.uint8
        assert frames.shape == ref.shape
        assert frames.shape[-1] == 3
        assert frames.shape[1] % 28 == 0
        assert frames.shape[2] % 28 == 0
        assert frames.shape[1] * frames.shape[2] <= 3136
        assert np.array_equal(frames, ref)
        assert meta == ref_meta.to_hf()
        assert meta["frames_indices"] == list(ref_meta.frames_indices)
    assert inputs.problem_type == "multiple_choice"
    assert inputs.extra_info["options"] == ["A. first", "B. second"]
    assert inputs.ground_truth == "A"


def test_image_and_video_row_and_text_row(video_data: dict, make_opts) -> None:
    opts = make_opts(video_source="cache_only")
    rows = _built_rows(video_data)
    both = row_to_inputs(rows["iv2"], opts)
    assert len(both.images) == 1
    assert len(both.videos) == 1
    assert (both.images[0].height, both.images[0].width) == (56, 84)  # image budget: 80x60 kept near its size
    assert both.videos[0][0].shape[1:3] == (28, 56)  # video budget: 96x64 frames shrunk to <= 3136 px
    text = row_to_inputs(rows["t4"], opts)
    assert text.images == []
    assert text.videos == []
    assert text.ground_truth == "4"


def test_raw_rows_in_prefer_cache_mode_use_the_cache_without_refs(video_data: dict, make_opts) -> None:
    opts = make_opts(video_source="prefer_cache")
    raw = json.loads(video_data["raw"].read_text().splitlines()[0])
    assert "video_cache" not in raw
    from evr1_train.data import loader_for

    loader = loader_for(opts)
    before = loader.misses
    images, videos = load_media(row_messages(raw, opts), opts, "v0")
    assert images is None
    assert len(videos) == 1
    assert loader.misses == before


def test_cache_only_miss_names_the_row_and_the_fix(video_data: dict, make_opts, tmp_path) -> None:
    from evr1_cache.testing import make_synthetic_video

    clip = make_synthetic_video(tmp_path / "new.mp4", n_frames=16, fps=8.0, size=(64, 64))
    row = {"problem_id": "new7", "problem": "What?", "answer": "x", "videos": [str(clip)]}
    with pytest.raises(MediaMissError, match=r"row new7: video .*new\.mp4.*run `evr1-cache build`"):
        row_to_inputs(row, make_opts(video_source="cache_only"))
    # prefer_cache: decode and warn, frames identical to a decode-mode load
    warm = row_to_inputs(row, make_opts(video_source="prefer_cache", media_root=str(tmp_path)))
    dec = row_to_inputs(row, make_opts(video_source="decode", cache_dir=None, media_root=str(tmp_path)))
    assert np.array_equal(warm.videos[0][0], dec.videos[0][0])
    assert warm.videos[0][1] == dec.videos[0][1]


def test_stale_cache_reference_is_never_served(video_data: dict, make_opts, budgets) -> None:
    other = {**budgets[0], "max_frames": 4}  # a different spec than the one the cache was built with
    opts = make_opts(video_source="cache_only", video=other)
    with pytest.raises(MediaMissError, match="built for spec"):
        row_to_inputs(_built_rows(video_data)["v0"], opts)


def test_ground_truth_and_offline_text(video_data: dict, make_opts) -> None:
    opts = make_opts()
    row = _built_rows(video_data)["v0"]
    assert ground_truth_of(row, opts) == "B"
    assert ground_truth_of({"reward_model": {"ground_truth": "7"}}, opts) == "7"
    with pytest.raises(ValueError, match="answer_key"):
        ground_truth_of({"problem": "x"}, opts)
    inputs = row_to_inputs(row, opts, hybrid=HybridConfig(enable=True))
    assert inputs.offline_text == "<think>the square is green</think><answer>B</answer>"
    assert "offline_output" not in inputs.extra_info
    assert "video_cache" not in inputs.extra_info


def test_options_validation(budgets) -> None:
    from evr1_train.data import DataOptions

    with pytest.raises(ValueError, match=r"needs data\.evr1\.cache_dir"):
        DataOptions.from_mapping({"video_source": "cache_only"})
    with pytest.raises(ValueError, match="video_source must be one of"):
        DataOptions.from_mapping({"video_source": "cache", "cache_dir": "x"})
    with pytest.raises(ValueError, match=r"unknown data.evr1 keys \['fpss'\]"):
        DataOptions.from_mapping({"fpss": 2, "video_source": "decode"})
    assert DataOptions.from_mapping({"video_source": "decode", "image": budgets[1]}).image_spec().max_pixels == 12544


def test_media_outside_the_media_root_are_refused_unless_allowed(make_opts, tmp_path) -> None:
    """Attack: a row naming a video outside the dataset's folder (absolute, `../`, a `file:` decoy) is read from disk
    only inside `data.evr1.media_root`; the refusal names the row and the opt-out key."""
    from evr1_cache.testing import make_synthetic_video

    root = tmp_path / "data"
    secret = make_synthetic_video(tmp_path / "elsewhere" / "secret.mp4", n_frames=8, fps=8.0, size=(64, 64))
    for path in (str(secret), "../elsewhere/secret.mp4"):
        row = {"problem_id": "out1", "problem": "What?", "answer": "x", "videos": [path]}
        opts = make_opts(video_source="decode", cache_dir=None, media_root=str(root))
        with pytest.raises(MediaMissError, match=r"row out1: .*outside the media folder.*allow_outside_media=true"):
            row_to_inputs(row, opts)
    allowed = make_opts(video_source="decode", cache_dir=None, media_root=str(root), allow_outside_media=True)
    assert row_to_inputs(row, allowed).videos[0][0].shape[0] > 0


def test_a_media_url_is_refused_unless_its_scheme_is_allowed_then_downloaded_once(
    make_opts, tmp_path, monkeypatch
) -> None:
    """A row's `http://` video (a loopback server) is refused naming the row and `data.evr1.allow_remote_media`
    without a request; with the key it is downloaded once and decoded like the local file."""
    from evr1_cache import decode_video
    from evr1_cache.testing import Route, loopback_http, make_synthetic_video

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    for proxy in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    local = make_synthetic_video(tmp_path / "local" / "clip.mp4", n_frames=8, fps=8.0, size=(64, 64))
    with pytest.raises(ValueError, match=r"data\.evr1\.allow_remote_media: .*choose from http,https"):
        make_opts(video_source="decode", cache_dir=None, allow_remote_media="http,ftp")
    with loopback_http({"/clip.mp4": Route(local.read_bytes())}) as server:
        row = {"problem_id": "web1", "problem": "What?", "answer": "x", "videos": [f"{server.url}/clip.mp4"]}
        refused = make_opts(video_source="decode", cache_dir=None)
        with pytest.raises(MediaMissError, match=r"row web1: .*data\.evr1\.allow_remote_media"):
            row_to_inputs(row, refused)
        assert server.requests == []
        allowed = make_opts(video_source="decode", cache_dir=None, allow_remote_media=["http"])
        first = row_to_inputs(row, allowed).videos[0][0]
        again = row_to_inputs(row, allowed).videos[0][0]
        assert server.requests == ["/clip.mp4"]
    opts = allowed.video_spec()
    expected = decode_video(local, opts)[0]
    assert np.array_equal(np.asarray(again), np.asarray(first))
    assert np.asarray(first).shape[0] == expected.shape[0]


def test_usable_rows_drop_missing_media_and_unscorable_answers_with_one_warning(
    video_data: dict, make_opts, caplog: pytest.LogCaptureFixture
) -> None:
    """The trainer's row check (engine.rows, also what `export-heldout` keeps): bad rows go, with their reasons."""
    import logging

    from evr1_rewards import RewardRouter
    from evr1_train.engine.rows import check_row, usable_rows

    opts = make_opts()
    rows = [json.loads(line) for line in video_data["raw"].read_text().splitlines()]
    gone = {**rows[0], "problem_id": "gone9", "videos": ["clips/missing.mp4"]}
    unscorable = {**rows[0], "problem_id": "odd7", "problem_type": "no such type"}
    router = RewardRouter()
    with caplog.at_level(logging.WARNING, logger="evr1_train.engine.rows"):
        kept = usable_rows(
            [*rows, gone, unscorable], opts, "held-out", lambda row, index: check_row(row, index, opts, router)
        )
    assert kept == rows
    assert "held-out data: skipped 2 of" in caplog.text
    assert "gone9: FileNotFoundError" in caplog.text
    assert "missing.mp4" in caplog.text
    assert "odd7:" in caplog.text
