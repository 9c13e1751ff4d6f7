"""cache -> train dataset, and the training side of reward parity, through evr1-train's verl-free row functions.

Runs in the `train` session (evr1-train installs verl and torch; the light `integration` session never does):
- a row of the dataset written by `evr1-cache build` (the console script) is served by `row_to_inputs` with exactly
  the cached frames and `VideoMeta` (`CacheReader.load` under the DataOptions' SamplingSpec), without decoding; the
  same row without cache references, and decoding on the fly, give identical frames and metadata;
- every case of tests/data/reward_parity.json, written as an EasyVideoR1 training row, reaches the verl reward
  adapter (`ground_truth_of` + `row_extra_info` -> `compute_score`) with the accuracy `evr1_rewards.score` gives
  (test_reward_parity.py ties that to the TRL adapter and to evr1-eval).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="runs in the train session (evr1-train needs verl)")

import numpy as np

from evr1_cache import CacheReader
from evr1_cache.testing import read_frame_index
from evr1_rewards import score
from evr1_rewards.integrations.verl import compute_score
from evr1_train.data import DataOptions, ground_truth_of, row_extra_info, row_to_inputs

#: DataOptions.video settings and the `evr1-cache build` flags a user passes for the same frames
VIDEO = {"fps": 4.0, "max_frames": 64, "min_pixels": 3136, "max_pixels": 12544, "size_factor": 28}
BUILD_FLAGS = "--fps 4 --max-frames 64 --min-pixels 3136 --max-pixels 12544 --size-factor 28".split()


def _options(dataset: Any, cache: Path, source: str) -> DataOptions:
    return DataOptions(video_source=source, cache_dir=str(cache), media_root=str(dataset.root), video=VIDEO)  # type: ignore[arg-type]


def test_train_rows_serve_the_cli_built_cache(
    dataset: Any, tmp_path: Path, decode_calls: list[str], cache_build: Any
) -> None:
    cache = tmp_path / "cache"
    cache_build(dataset.train_file, cache, *BUILD_FLAGS, console=True)
    built = [json.loads(x) for x in (cache / "train.evr1.jsonl").read_text().splitlines() if x.strip()]
    assert len(built) == len(dataset.videos)
    opts = _options(dataset, cache, "cache_only")
    spec = opts.video_spec()
    assert sorted(p.name for p in (cache / "videos").iterdir()) == [spec.key()], "CLI flags and DataOptions disagree"
    reader = CacheReader(cache)

    decode_calls.clear()
    served = []
    for i, row in enumerate(built):
        assert row["cache_errors"] == [], row
        assert row["video_cache"][0] is not None, row
        inputs = row_to_inputs(row, opts, index=i)
        assert inputs.problem_type == "multiple_choice"
        assert inputs.ground_truth == "A"
        (video,) = inputs.videos
        frames, meta = reader.load(dataset.videos[i], spec)
        got, got_meta = video
        assert np.array_equal(np.asarray(got), frames), f"row {i}: frames differ from the cache entry"
        assert got_meta == meta.to_hf(), f"row {i}: metadata differs from the cached VideoMeta"
        assert [read_frame_index(f) for f in got] == list(meta.frames_indices), f"row {i}: wrong source frames"
        served.append((frames, meta.to_hf()))
    assert decode_calls == [], f"cache_only rows decoded {decode_calls}"

    # the original rows (no cache references): found by content + spec, same frames, still no decode
    originals = [json.loads(x) for x in dataset.train_file.read_text().splitlines() if x.strip()]
    for i, row in enumerate(originals):
        (video,) = row_to_inputs(row, opts, index=i).videos
        assert np.array_equal(np.asarray(video[0]), served[i][0]), f"row {i}: frames differ without cache refs"
        assert video[1] == served[i][1], f"row {i}: metadata differs without cache refs"
    assert decode_calls == []

    # decoding on the fly (no cache at all) hands the trainer identical frames and timestamps
    decode_opts = DataOptions(video_source="decode", media_root=str(dataset.root), video=VIDEO)  # type: ignore[arg-type]
    for i, row in enumerate(originals):
        (video,) = row_to_inputs(row, decode_opts, index=i).videos
        assert np.array_equal(np.asarray(video[0]), served[i][0]), f"row {i}: decoded frames differ from the cache"
        assert video[1] == served[i][1], f"row {i}: decoded metadata differs from the cache"
    assert sorted(decode_calls) == sorted(str(v) for v in dataset.videos)


CASES = json.loads((Path(__file__).parent / "data" / "reward_parity.json").read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_training_row_reaches_the_reward_unchanged(case: dict[str, Any]) -> None:
    """EasyVideoR1 row -> (ground truth, extra_info) as evr1-train's dataset hands them to verl -> compute_score."""
    row = {
        "problem": "<video>What happens in the video?",
        "answer": f"<answer>{case['truth']}</answer>",
        "problem_type": case["problem_type"],
        "options": case.get("options"),
        "videos": ["clip.mp4"],
        "data_type": "video",
    }
    opts = DataOptions(video_source="decode")
    got = compute_score(
        data_source=str(row.get("data_source") or "evr1"),
        solution_str=case["response"],
        ground_truth=ground_truth_of(row, opts),
        extra_info=row_extra_info(row, opts, 0),
    )
    direct = score(case["response"], case["truth"], case["problem_type"], options=case.get("options"))
    assert got["accuracy"] == pytest.approx(direct.accuracy, abs=1e-12), (got, direct)
    assert got["score"] == pytest.approx(direct.overall, abs=1e-12)
    if "expect" in case:
        assert got["accuracy"] == pytest.approx(case["expect"], abs=1e-9)


def test_a_stale_cache_reference_is_never_served(
    dataset: Any, tmp_path: Path, decode_calls: list[str], cache_build: Any
) -> None:
    """The dataset written by `evr1-cache build` names each row's entry file. If the video is replaced afterwards
    (re-encoded, trimmed), that entry holds another video's frames: the trainer must decode the new file, as
    evr1-eval does (its content-addressed look-up misses), and never train on frames the model will not be
    evaluated on."""
    from evr1_cache import MediaMissError, decode_video
    from evr1_cache.testing import make_synthetic_video

    data = dataset.copy_to(tmp_path / "data")
    cache = tmp_path / "cache"
    cache_build(data.train_file, cache, *BUILD_FLAGS)
    row = json.loads((cache / "train.evr1.jsonl").read_text().splitlines()[0])
    assert row["video_cache"][0] is not None
    video = data.videos[0]
    make_synthetic_video(video, n_frames=20, fps=10.0, size=(96, 64))  # the same path, another video
    spec = _options(data, cache, "prefer_cache").video_spec()
    assert not CacheReader(cache).contains(video, spec), "content look-up (evr1-eval's) must miss a changed video"
    fresh, fresh_meta = decode_video(video, spec)

    decode_calls.clear()
    (served,) = row_to_inputs(row, _options(data, cache, "prefer_cache")).videos
    assert served[1] == fresh_meta.to_hf(), f"served the stale entry {row['video_cache'][0]['file']}: {served[1]}"
    assert np.array_equal(np.asarray(served[0]), fresh)
    assert decode_calls == [str(video)]
    with pytest.raises(MediaMissError):
        row_to_inputs(row, _options(data, cache, "cache_only"))


@pytest.mark.parametrize(
    "video",
    [
        {"fps": 4.0, "max_frames": 64},
        {"nframes": 8},  # a fixed frame count: `evr1-cache build --nframes 8`, `evr1-eval run --sampling nframes=8`
        {"nframes": 8, "size_factor": 32, "min_pixels": 3136, "max_pixels": 12544},
    ],
    ids=["fps", "nframes", "nframes-qwen3"],
)
def test_data_options_name_the_spec_the_cache_cli_builds(video: dict[str, Any]) -> None:
    """`data.evr1.video` takes the same settings as `evr1-cache build`'s flags, with the same meaning (the trainer's
    defaults fill only what is not given), so the trainer looks up the entries the CLI wrote."""
    from evr1_cache.cli import parser, specs_from_args

    defaults = {"fps": 2.0, "max_frames": 64, "min_pixels": 128 * 28 * 28, "max_pixels": 768 * 28 * 28}
    given = {**{k: v for k, v in defaults.items() if not (k == "fps" and "nframes" in video)}, **video}
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in given.items()]
    cli_spec, _ = specs_from_args(parser().parse_args(["build", "data.jsonl", "--out", "cache", *flags]))
    train_spec = DataOptions(video_source="decode", video=video).video_spec()
    assert train_spec == cli_spec, f"data.evr1.video={video} gives {train_spec}, `evr1-cache build {flags}` {cli_spec}"
