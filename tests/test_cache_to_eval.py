"""cache -> eval: frames cached by `evr1-cache build` / `evr1-eval precompute` are exactly what `evr1-eval run` hands
the engine, with the same `VideoMeta`; decoding on the fly hands it identical frames and metadata; a run over a
precomputed cache decodes nothing.

The engine is the `fake` backend, extended here to keep a copy of every frame array it receives (the fake itself
records only shapes and metadata). Everything else is the real CLI path: benchmark loader, SamplingSpec overrides,
MediaLoader, runner, results.jsonl.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evr1_cache import CacheReader, ImageSpec, SamplingSpec, VideoMeta
from evr1_cache.cli import main as cache_main
from evr1_cache.testing import make_synthetic_image, read_frame_index
from evr1_eval.backends import GenerationParams, Request, backend_names, register
from evr1_eval.backends.fake import FakeBackend
from evr1_eval.benchmarks import get_benchmark
from evr1_eval.cli import main as eval_main
from evr1_eval.types import Generation

RECORDER = "integration-recorder"
#: request id -> [(frames, metadata)] per video, as the backend received them
RECEIVED: dict[str, list[tuple[np.ndarray, dict[str, Any]]]] = {}
#: request id -> [pixels] per image
RECEIVED_IMAGES: dict[str, list[np.ndarray]] = {}


class RecordingBackend(FakeBackend):
    """The fake backend, keeping a copy of the frames of every request (the fake keeps only their shapes)."""

    name = RECORDER

    async def generate(self, request: Request, params: GenerationParams) -> Generation:
        RECEIVED[request.id] = [(np.array(v.frames, copy=True), dict(v.metadata)) for v in request.videos]
        RECEIVED_IMAGES[request.id] = [np.array(i.pixels, copy=True) for i in request.images]
        return await super().generate(request, params)


if RECORDER not in backend_names():
    register(RECORDER)(RecordingBackend)

OPTIONS_MC = ["A. a pattern of blocks", "B. a cat", "C. a car", "D. nothing"]
#: question id -> index of its clip in `dataset.videos` (see conftest: clip0 is asked twice)
QUESTION_VIDEO = {"q0": 0, "q1": 1, "q2": 2, "q3": 0}

#: name -> (`evr1-eval run --sampling` overrides, the `evr1-cache build` flags a user passes for the same frames,
#: the `model_type` of the checkpoint folder given as `--model` (None: a hub-style name, no local config))
VARIANTS: dict[str, tuple[list[str], list[str], str | None]] = {
    # mvbench's documented frame settings (Qwen's 2 fps recipe, at most 128 frames; default pixel budget)
    "benchmark-defaults": ([], "--fps 2 --min-frames 4 --max-frames 128".split(), None),
    # a fixed frame count and a small pixel budget for a Qwen3-VL checkpoint: the run takes the 32-px geometry from
    # the checkpoint's config.json, the cache was built with --size-factor 32
    "qwen3-checkpoint-nframes": (
        ["nframes=8", "min_pixels=3136", "max_pixels=12544"],
        "--nframes 8 --size-factor 32 --min-pixels 3136 --max-pixels 12544 --max-frames 128".split(),
        "qwen3_vl",
    ),
}


@pytest.fixture
def received() -> dict[str, list[tuple[np.ndarray, dict[str, Any]]]]:
    RECEIVED.clear()
    RECEIVED_IMAGES.clear()
    return RECEIVED


@pytest.fixture
def image_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read of an image file through evr1-cache in this process (cache builds and on-the-fly loads)."""
    import evr1_cache
    import evr1_cache.image

    calls: list[str] = []
    original = evr1_cache.image.load_image

    def counted(path: Any, image_spec: Any) -> np.ndarray:
        calls.append(str(path))
        return original(path, image_spec)

    monkeypatch.setattr(evr1_cache.image, "load_image", counted)
    monkeypatch.setattr(evr1_cache, "load_image", counted, raising=False)
    return calls


def run_eval(dataset: Any, out: Path, overrides: list[str], *extra: str, model: str = "fake-model") -> int:
    args = ["run", "--model", model, "--backend", RECORDER, "--engine-kwargs", json.dumps({"response": "A"})]
    args += ["--benchmarks", dataset.benchmark, "--annotations-dir", str(dataset.ann_dir)]
    args += ["--media-root", str(dataset.media), "--out", str(out), "--no-progress"]
    for item in overrides:
        args += ["--sampling", item]
    return eval_main([*args, *extra])


def run_spec(out: Path, benchmark: str) -> SamplingSpec:
    """The SamplingSpec a run used, as it recorded it in run.json (and its key must match)."""
    record = dict(json.loads((out / benchmark / "run.json").read_text())["fingerprint"]["sampling"])
    key = record.pop("key")
    spec = SamplingSpec.from_dict(record)
    assert spec.key() == key, f"run.json records spec key {key} but its fields give {spec.key()}"
    return spec


def result_rows(out: Path, benchmark: str) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (out / benchmark / "results.jsonl").read_text().splitlines() if line]
    return {r["id"]: r for r in rows}


def assert_frames_are(got: tuple[np.ndarray, dict[str, Any]], frames: np.ndarray, meta: VideoMeta, what: str) -> None:
    got_frames, got_meta = got
    assert got_frames.dtype == np.uint8, what
    assert got_frames.shape == frames.shape, (what, got_frames.shape, frames.shape)
    assert np.array_equal(got_frames, frames), f"{what}: the backend received other pixels than the cache entry"
    assert got_meta == meta.to_hf(), f"{what}: metadata {got_meta} != cached VideoMeta.to_hf() {meta.to_hf()}"
    timestamps = [i / got_meta["fps"] for i in got_meta["frames_indices"]]
    assert timestamps == list(meta.timestamps), f"{what}: other timestamps than the cached VideoMeta"
    # and they are the right source frames: each frame shows the index VideoMeta says it is
    shown = [read_frame_index(f) for f in got_frames]
    assert shown == list(meta.frames_indices), f"{what}: frames show source indices {shown}, meta says otherwise"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_run_serves_cli_built_cache_and_decoding_gives_the_same_frames(
    variant: str, dataset: Any, tmp_path: Path, received: dict[str, Any], decode_calls: list[str], cache_build: Any
) -> None:
    overrides, build_flags, model_type = VARIANTS[variant]
    model = "fake-model"
    if model_type is not None:  # a local checkpoint folder: only its config.json is read
        (tmp_path / "ckpt").mkdir()
        (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"model_type": model_type}))
        model = str(tmp_path / "ckpt")
    cache = tmp_path / "cache"
    # the training data's cache (paths relative to its file); once through the installed console script
    cache_build(dataset.train_file, cache, *build_flags, console=variant == "benchmark-defaults")
    decode_calls.clear()

    # 1. evaluation over that cache: every question is served from it, nothing is decoded
    assert run_eval(dataset, tmp_path / "cached", overrides, "--cache-dir", str(cache), model=model) == 0
    assert decode_calls == [], f"run decoded {decode_calls} although the cache holds every video"
    rows = result_rows(tmp_path / "cached", dataset.benchmark)
    assert sorted(rows) == sorted(QUESTION_VIDEO)
    assert all(r["error"] is None and r["score"] == 1.0 for r in rows.values()), rows

    spec = run_spec(tmp_path / "cached", dataset.benchmark)
    if not overrides:
        assert spec == get_benchmark(dataset.benchmark).sampling
    else:
        assert (spec.nframes, spec.fps, spec.size_factor) == (8, None, 32)
    spec_dirs = sorted(p.name for p in (cache / "videos").iterdir())
    assert spec_dirs == [spec.key()], f"evr1-cache build {build_flags} wrote {spec_dirs}, the run uses {spec.key()}"

    reader = CacheReader(cache)
    cached = {qid: received[qid] for qid in QUESTION_VIDEO}
    for qid, vi in QUESTION_VIDEO.items():
        assert len(cached[qid]) == 1
        frames, meta = reader.load(dataset.videos[vi], spec)
        assert_frames_are(cached[qid][0], frames, meta, f"{variant} {qid} (cache)")
        assert frames.shape[1] % spec.size_factor == 0
        assert frames.shape[2] % spec.size_factor == 0
        if spec.nframes is not None:
            assert len(meta.frames_indices) == spec.nframes

    # 2. the same run without a cache decodes on the fly and hands the backend identical frames and metadata
    received.clear()
    assert run_eval(dataset, tmp_path / "decoded", overrides, model=model) == 0
    assert sorted(decode_calls) == sorted(str(dataset.videos[vi]) for vi in QUESTION_VIDEO.values())
    assert run_spec(tmp_path / "decoded", dataset.benchmark) == spec
    for qid, vi in QUESTION_VIDEO.items():
        frames, meta = reader.load(dataset.videos[vi], spec)
        assert_frames_are(received[qid][0], frames, meta, f"{variant} {qid} (decoded on the fly)")


def test_precompute_fills_exactly_the_entries_run_hits(
    dataset: Any,
    tmp_path: Path,
    received: dict[str, Any],
    decode_calls: list[str],
    cache_entries: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    overrides = ["fps=4", "min_pixels=3136", "max_pixels=12544"]
    # a run started without a cache (the first two questions, decoded on the fly) ...
    assert run_eval(dataset, tmp_path / "run", overrides, "--limit", "2") == 0
    assert len(decode_calls) == 2
    decode_calls.clear()
    # ... then the cache is precomputed ...
    cache = tmp_path / "cache"
    args = ["precompute", dataset.benchmark, "--annotations-dir", str(dataset.ann_dir)]
    args += ["--media-root", str(dataset.media), "--cache-dir", str(cache), "--workers", "1", "--no-progress"]
    for item in overrides:
        args += ["--sampling", item]
    assert eval_main(args) == 0, capsys.readouterr()
    # each distinct video decoded once (clip0 serves two questions)
    assert sorted(decode_calls) == sorted(str(v) for v in dataset.videos)
    entries = cache_entries(cache)
    mtimes = {p: p.stat().st_mtime_ns for p in entries}

    # ... and the run resumes over it: the frames are the same, so the settings are too; nothing is decoded
    decode_calls.clear()
    capsys.readouterr()
    assert run_eval(dataset, tmp_path / "run", overrides, "--cache-dir", str(cache)) == 0
    assert decode_calls == [], f"run decoded {decode_calls} after precompute"
    assert f"{len(QUESTION_VIDEO)} selected, 2 already done, 2 run, 0 errors" in capsys.readouterr().out
    spec = run_spec(tmp_path / "run", dataset.benchmark)
    reader = CacheReader(cache)
    # exactly the entries the run looked up: no more, no fewer, none rewritten by the run
    assert entries == {reader.path_for(v, spec) for v in dataset.videos}
    assert {p: p.stat().st_mtime_ns for p in cache_entries(cache)} == mtimes
    for qid, vi in QUESTION_VIDEO.items():
        frames, meta = reader.load(dataset.videos[vi], spec)
        assert_frames_are(received[qid][0], frames, meta, f"{qid} (precomputed)")
    assert all(r["error"] is None for r in result_rows(tmp_path / "run", dataset.benchmark).values())

    # `run --write-cache` on an empty cache stores the same entries (same keys, pixels and VideoMeta) as precompute
    decode_calls.clear()
    cache2 = tmp_path / "cache2"
    assert run_eval(dataset, tmp_path / "run2", overrides, "--cache-dir", str(cache2), "--write-cache") == 0
    assert set(decode_calls) == {str(v) for v in dataset.videos}
    assert {p.relative_to(cache2) for p in cache_entries(cache2)} == {p.relative_to(cache) for p in entries}
    # both caches pass evr1-cache's own verifier (eval writes entries through the cache's store)
    capsys.readouterr()
    assert cache_main(["verify", str(cache)]) == 0, capsys.readouterr().out
    assert cache_main(["verify", str(cache2)]) == 0, capsys.readouterr().out
    reader2 = CacheReader(cache2)
    for video in dataset.videos:
        (f1, m1), (f2, m2) = reader.load(video, spec), reader2.load(video, spec)
        assert np.array_equal(f1, f2), video
        assert m1 == m2, video


def test_cache_built_for_other_frame_settings_is_never_served(
    dataset: Any, tmp_path: Path, received: dict[str, Any], decode_calls: list[str], cache_build: Any
) -> None:
    overrides = ["fps=4", "min_pixels=3136", "max_pixels=12544"]
    cache = tmp_path / "cache"
    # same videos, one setting different (max_frames): a different key, so the run must decode instead
    cache_build(dataset.train_file, cache, *"--fps 4 --min-pixels 3136 --max-pixels 12544 --max-frames 6".split())
    decode_calls.clear()
    assert run_eval(dataset, tmp_path / "run", overrides, "--cache-dir", str(cache)) == 0
    assert len(decode_calls) == len(QUESTION_VIDEO), "a cache entry built for other frame settings was served"
    spec = run_spec(tmp_path / "run", dataset.benchmark)
    assert spec.max_frames != 6
    for qid in QUESTION_VIDEO:
        frames, _ = received[qid][0]
        assert len(frames) > 6, f"{qid}: got the 6-frame entry of another spec"


def test_video_and_image_sample_is_served_from_the_training_cache(
    dataset: Any,
    tmp_path: Path,
    received: dict[str, Any],
    decode_calls: list[str],
    image_loads: list[str],
    cache_build: Any,
) -> None:
    """A Video-MMMU style question (a video plus an image shown after it): both come from a cache that
    `evr1-cache build` made from training rows, with the benchmark's video spec and the image budget the run uses."""
    image = make_synthetic_image(tmp_path / "img" / "slide.png", size=(150, 100), index=77)
    video = dataset.videos[1]
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"problem": "<video><image>?", "answer": "A", "videos": [str(video)],
                                 "images": [str(image)], "problem_type": "multiple choice"}) + "\n")  # fmt: skip
    ann = tmp_path / "ann"
    ann.mkdir()
    row = {"problem_id": "m0", "problem": "What does the slide show?", "options": OPTIONS_MC, "path": str(video),
           "image_path": str(image), "solution": "<answer>A</answer>", "problem_type": "multiple choice"}  # fmt: skip
    (ann / "videommmu.json").write_text(json.dumps([row]))
    bench = get_benchmark("videommmu")
    spec = bench.sampling
    flags = ["--fps", str(spec.fps), "--min-frames", str(spec.min_frames), "--max-frames", str(spec.max_frames)]
    cache = tmp_path / "cache"
    # the shared clips lie outside this test's folder: both commands are told to read media anywhere
    cache_build(train, cache, *flags, "--allow-outside-media")
    decode_calls.clear()
    image_loads.clear()

    def run(out: Path, *extra: str) -> None:
        args = ["run", "--model", "fake-model", "--backend", RECORDER, "--benchmarks", "videommmu", "--no-progress"]
        args.append("--allow-outside-media")
        assert eval_main([*args, "--annotations-dir", str(ann), "--out", str(out), *extra]) == 0
        assert result_rows(out, "videommmu")["m0"]["error"] is None

    run(tmp_path / "cached", "--cache-dir", str(cache))
    assert (decode_calls, image_loads) == ([], []), "the run decoded media that the cache holds"
    assert run_spec(tmp_path / "cached", "videommmu") == spec
    reader = CacheReader(cache)
    image_spec = ImageSpec(size_factor=spec.size_factor)
    frames, meta = reader.load(video, spec)
    assert_frames_are(received["m0"][0], frames, meta, "videommmu video (cache)")
    (pixels,) = RECEIVED_IMAGES["m0"]
    cached_pixels = reader.load_image(image, image_spec)
    assert np.array_equal(pixels, cached_pixels), "the backend received other image pixels than the cache entry"
    assert read_frame_index(pixels) == 77

    received.clear()
    run(tmp_path / "decoded")
    assert (decode_calls, image_loads) == ([str(video)], [str(image)])
    assert_frames_are(received["m0"][0], frames, meta, "videommmu video (decoded)")
    assert np.array_equal(RECEIVED_IMAGES["m0"][0], cached_pixels), "decoded image differs from the cached one"


def test_write_cache_with_parallel_loads_of_one_video_loses_no_sample(
    dataset: Any, tmp_path: Path, received: dict[str, Any], decode_calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Benchmarks ask many questions about one video. With `--write-cache` and several media workers, the first
    loads of that video all miss the cache and store it at once; none of them may fail (an error row scores 0)."""
    import time

    import evr1_cache.writer

    ann = tmp_path / "ann"
    ann.mkdir()
    rows = [{"problem_id": f"s{i}", "problem": f"Question {i}?", "options": OPTIONS_MC, "path": str(dataset.videos[0]),
             "solution": "<answer>A</answer>", "problem_type": "multiple choice"} for i in range(6)]  # fmt: skip
    (ann / "tempcompass.json").write_text(json.dumps(rows))
    write_entry = evr1_cache.writer.write_entry

    def slow_write_entry(*args: Any, **kwargs: Any) -> int:
        size = write_entry(*args, **kwargs)
        time.sleep(0.3)  # a large entry on a slow disk: the writes of concurrent loads overlap
        return size

    monkeypatch.setattr(evr1_cache.writer, "write_entry", slow_write_entry)
    cache = tmp_path / "cache"
    args = ["run", "--model", "fake-model", "--backend", RECORDER, "--benchmarks", "tempcompass", "--no-progress"]
    args += ["--annotations-dir", str(ann), "--out", str(tmp_path / "out"), "--cache-dir", str(cache)]
    args.append("--allow-outside-media")  # the shared clip lies outside this test's folder
    assert eval_main([*args, "--write-cache", "--media-workers", "4", "--sampling", "fps=4"]) == 0
    errors = {k: r["error"] for k, r in result_rows(tmp_path / "out", "tempcompass").items() if r["error"]}
    assert not errors, f"concurrent cache writes of one video failed samples: {errors}"
    spec = run_spec(tmp_path / "out", "tempcompass")
    frames, meta = CacheReader(cache).load(dataset.videos[0], spec)
    for qid in (r["problem_id"] for r in rows):
        assert_frames_are(received[qid][0], frames, meta, qid)
    leftovers = [p.name for p in cache.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == [], f"temp files left in the cache: {leftovers}"


def test_a_malformed_annotation_line_is_reported_by_precompute_and_build(
    dataset: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One bad line of a JSONL file: `evr1-eval precompute` and `evr1-cache build` both name it (file and line),
    cache every other row, and exit 1 (2 is for usage errors: a missing or unreadable file)."""
    rows = json.loads((dataset.ann_dir / f"{dataset.benchmark}.json").read_text())
    lines = [json.dumps(r) for r in rows]
    lines.insert(2, '{"problem_id": "broken", "problem": "cut off')
    ann = tmp_path / "ann"
    ann.mkdir()
    jsonl = ann / f"{dataset.benchmark}.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    cache = tmp_path / "cache"
    args = ["precompute", dataset.benchmark, "--annotations-dir", str(ann), "--media-root", str(dataset.media)]
    args += ["--cache-dir", str(cache), "--no-progress"]
    args += ["--sampling", "fps=1", "--sampling", "min_pixels=3136", "--sampling", "max_pixels=12544"]
    assert eval_main(args) == 1
    err = capsys.readouterr().err
    assert "1 annotation row(s) could not be read" in err
    assert "line 3" in err
    assert "precompute: 1 row(s) or media failed" in err
    assert len(cache_files := list(cache.rglob("*.safetensors"))) == len(dataset.videos), cache_files
    # the same file through evr1-cache build (EasyVideoR1 rows: `path` is not a media key there, so add `videos`)
    train = tmp_path / "train.jsonl"
    train.write_text("\n".join([*lines[:3], json.dumps({**rows[2], "videos": [rows[2]["path"]]})]) + "\n")
    rc = cache_main(["build", str(train), "--out", str(tmp_path / "c2"), "--media-root", str(dataset.media)])
    out = capsys.readouterr()
    assert rc == 1
    assert f"FAILED {train}:3: not valid JSON" in out.err
    assert "Traceback" not in out.err
    assert "rows 4 (1 malformed) |" in out.out
    assert cache_main(["build", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "c3")]) == 2
