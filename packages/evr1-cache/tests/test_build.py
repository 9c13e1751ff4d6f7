"""`build_cache` / `evr1-cache build`: every media of every row, once; bad inputs reported; resumable; shardable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from evr1_cache import CacheReader, build_cache, decode_video, load_image
from evr1_cache.cli import main
from evr1_cache.spec import ImageSpec, SamplingSpec
from evr1_cache.testing import make_synthetic_image, make_synthetic_video, read_frame_index
from evr1_cache.verify import verify_cache

SPEC_ARGS = ["--max-frames", "16", "--min-pixels", str(16 * 28 * 28), "--max-pixels", str(64 * 28 * 28)]
IMAGE_ARGS = ["--image-min-pixels", str(16 * 28 * 28), "--image-max-pixels", str(64 * 28 * 28)]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def row(i: int, videos: list[str] = (), images: list[str] = ()) -> dict:
    return {
        "problem": f"question {i}",
        "answer": "A",
        "problem_type": "multiple choice",
        "data_type": "video" if videos else "image",
        "options": ["A", "B"],
        "videos": list(videos),
        "images": list(images),
    }


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """Good media under awkward names plus every bad-input case of the issue, in one JSONL."""
    media = tmp_path / "média dir"
    make_synthetic_video(media / "clip one.mp4", 50, 25.0, (128, 96), gop=10)
    make_synthetic_video(media / "视频 two.mp4", 30, 10.0, (96, 64))
    make_synthetic_video(media / "one frame.mp4", 1, 25.0, (96, 64))
    make_synthetic_image(media / "still.png", (300, 200), index=9)
    (media / "empty.mp4").write_bytes(b"")
    (media / "text.mp4").write_text("not a video at all\n" * 20)
    good = (media / "clip one.mp4").read_bytes()
    (media / "truncated.mp4").write_bytes(good[: len(good) // 3])
    (media / "dir.mp4").mkdir()
    rows = [
        row(0, ["média dir/clip one.mp4"]),
        row(1, ["média dir/clip one.mp4", "média dir/视频 two.mp4"], ["média dir/still.png"]),
        row(2, ["média dir/missing.mp4"]),
        row(3, ["média dir/empty.mp4", "média dir/text.mp4"]),
        row(4, ["média dir/truncated.mp4", "média dir/dir.mp4", "média dir/one frame.mp4"]),
        row(5, [str(media / "视频 two.mp4")]),  # absolute path to a video other rows use too
    ]
    return write_jsonl(tmp_path / "train data.jsonl", rows)


def test_build_caches_everything_once_and_reports_each_bad_file(
    dataset: Path, tmp_path: Path, spec: SamplingSpec, image_spec: ImageSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cäche out"
    rc = main(["build", str(dataset), "--out", str(out), *SPEC_ARGS, *IMAGE_ARGS, "--no-progress"])
    assert rc == 1  # something failed
    captured = capsys.readouterr()
    bad = ["missing.mp4", "empty.mp4", "text.mp4", "truncated.mp4", "dir.mp4", "one frame.mp4"]
    failed_lines = [line for line in captured.err.splitlines() if line.startswith("FAILED ")]
    assert sorted(Path(line.split(": ")[0].removeprefix("FAILED ")).name for line in failed_lines) == sorted(bad)
    report = (out / "errors.rank-00000-of-00001.txt").read_text(encoding="utf-8").splitlines()
    assert len(report) == len(bad)
    assert all(": " in line for line in report)
    assert "built 3" in captured.out  # two distinct videos (shared ones decoded once) + one image

    media = dataset.parent / "média dir"
    reader = CacheReader(out)
    for name in ("clip one.mp4", "视频 two.mp4"):
        frames, meta = reader.load(media / name, spec)
        ref, _ = decode_video(media / name, spec)
        assert np.array_equal(frames, ref)
        assert [read_frame_index(f) for f in frames] == list(meta.frames_indices)
    assert np.array_equal(
        reader.load_image(media / "still.png", image_spec), load_image(media / "still.png", image_spec)
    )

    rows = [json.loads(line) for line in (out / "train data.evr1.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["problem"] for r in rows] == [f"question {i}" for i in range(6)]
    assert rows[1]["video_cache"][0]["file"] == rows[0]["video_cache"][0]["file"]  # one entry, two rows
    assert rows[1]["video_cache"][1]["file"] == rows[5]["video_cache"][0]["file"]  # relative and absolute path
    assert rows[1]["video_cache"][1]["meta"]["total_num_frames"] == 30
    assert rows[1]["image_cache"][0]["file"].startswith("images/")
    assert rows[4]["video_cache"] == [None, None, None]
    assert len(rows[4]["cache_errors"]) == 3
    assert rows[0]["cache_errors"] == []
    entry = reader.entry_at(rows[0]["video_cache"][0], spec, source=media / "clip one.mp4")
    assert entry.meta.to_dict() == rows[0]["video_cache"][0]["meta"]
    assert entry.frames.shape[0] == len(rows[0]["video_cache"][0]["meta"]["frames_indices"])
    index = [json.loads(line) for line in (out / "index" / "rank-00000-of-00001.jsonl").read_text().splitlines()]
    assert sum(r["status"] == "ok" for r in index) == 3
    assert sum(r["status"] == "error" for r in index) == len(bad)
    assert verify_cache(out).ok


def test_rerun_resumes_and_clean_data_exits_zero(tmp_path: Path, spec: SamplingSpec, image_spec: ImageSpec) -> None:
    make_synthetic_video(tmp_path / "a.mp4", 40, 20.0, (96, 64))
    make_synthetic_video(tmp_path / "b.mp4", 40, 20.0, (96, 64), gop=5)
    data = write_jsonl(tmp_path / "d.jsonl", [row(0, ["a.mp4"]), row(1, ["b.mp4", "a.mp4"])])
    first = build_cache(data, tmp_path / "c", spec, image_spec, progress=False)
    assert (first.built, first.skipped, first.failed, first.ok) == (2, 0, 0, True)
    entry = next((tmp_path / "c" / "videos").rglob("*.safetensors"))
    mtime = entry.stat().st_mtime_ns
    leftover = entry.parent / f".{entry.stem}.otherhost.4242.tmp"  # as a SIGKILLed writer leaves it
    leftover.write_bytes(b"partial")
    assert not verify_cache(tmp_path / "c").ok
    second = build_cache(data, tmp_path / "c", spec, image_spec, progress=False)
    assert not leftover.exists()
    assert verify_cache(tmp_path / "c").ok
    assert (second.built, second.skipped, second.failed) == (0, 2, 0)
    assert entry.stat().st_mtime_ns == mtime  # finished work is never redone
    assert main(["build", str(data), "--out", str(tmp_path / "c"), *SPEC_ARGS, "--no-progress"]) == 0


def test_parquet_and_json_inputs_with_media_root(tmp_path: Path, spec: SamplingSpec, image_spec: ImageSpec) -> None:
    import pyarrow as pa
    import pyarrow.parquet as papq

    root = tmp_path / "root"
    make_synthetic_video(root / "v.mp4", 30, 15.0, (96, 64))
    rows = [row(0, ["v.mp4"]), row(1, ["v.mp4"])]
    pq = tmp_path / "meta" / "d.parquet"
    pq.parent.mkdir()
    papq.write_table(pa.Table.from_pylist(rows), str(pq))
    js = tmp_path / "meta" / "d.json"
    js.write_text(json.dumps(rows))
    for data in (pq, js):
        rep = build_cache(data, tmp_path / "c", spec, image_spec, media_root=root, progress=False)
        assert rep.ok
        assert rep.videos == 1
        assert rep.output_data is not None
        out_rows = [json.loads(x) for x in rep.output_data.read_text().splitlines()]
        assert len(out_rows) == 2
        assert all(r["video_cache"][0] for r in out_rows)
        # the output dataset lives in the cache folder: its media paths are rebased so they resolve from there
        for r in out_rows:
            assert not Path(r["videos"][0]).is_absolute()
            assert (rep.output_data.parent / r["videos"][0]).resolve() == (root / "v.mp4").resolve()
    # without --media-root the paths resolve next to the data file, where the video is not
    bad = build_cache(js, tmp_path / "c2", spec, image_spec, progress=False)
    assert bad.failed == 1
    assert "file not found" in bad.errors[0]


def test_ranks_split_the_work_without_coordination(tmp_path: Path, spec: SamplingSpec, image_spec: ImageSpec) -> None:
    names = [f"v{i}.mp4" for i in range(8)]
    for i, n in enumerate(names):
        make_synthetic_video(tmp_path / n, 20 + i, 10.0, (64, 48))
    data = write_jsonl(tmp_path / "d.jsonl", [row(i, [n]) for i, n in enumerate(names)])
    out = tmp_path / "c"
    reports = [build_cache(data, out, spec, image_spec, rank=r, world_size=3, progress=False) for r in range(3)]
    assert sum(r.built for r in reports) == 8
    assert all(r.ok for r in reports)
    assert all(r.built < 8 for r in reports)
    assert len({r.index_file for r in reports}) == 3
    assert reports[-1].output_data is not None or any("other ranks" in n for r in reports for n in r.notes)
    final = build_cache(data, out, spec, image_spec, progress=False)
    assert (final.built, final.skipped) == (0, 8)
    assert final.output_data is not None
    with pytest.raises(ValueError, match="rank"):
        build_cache(data, out, spec, image_spec, rank=3, world_size=3)


def test_sigkill_mid_build_then_rerun_is_clean(tmp_path: Path) -> None:
    names = [f"clip {i} ü.mp4" for i in range(10)]
    for i, n in enumerate(names):
        make_synthetic_video(tmp_path / n, 150, 30.0, (320, 240), gop=25 + i)
    data = write_jsonl(tmp_path / "d.jsonl", [row(i, [n]) for i, n in enumerate(names)])
    out = tmp_path / "c"
    cmd = [sys.executable, "-m", "evr1_cache.cli", "build", str(data), "--out", str(out), *SPEC_ARGS, "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    index = out / "index" / "rank-00000-of-00001.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if index.exists() and index.read_text().count("\n") >= 2:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "build finished before it could be killed; make the clips longer"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = verify_cache(out)
    assert not partial.corrupt  # a killed build leaves no half-file at a final path
    assert 2 <= partial.videos < 10
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    after = verify_cache(out)
    assert after.ok
    assert after.videos == 10
    assert main(["verify", str(out)]) == 0


def test_workers_two_match_single_worker(tmp_path: Path, spec: SamplingSpec, image_spec: ImageSpec) -> None:
    for i in range(4):
        make_synthetic_video(tmp_path / f"w{i}.mp4", 40, 20.0, (96, 64), gop=3 + i)
    make_synthetic_image(tmp_path / "i.png", (90, 60))
    data = write_jsonl(tmp_path / "d.jsonl", [row(i, [f"w{i}.mp4"], ["i.png"]) for i in range(4)])
    one = build_cache(data, tmp_path / "c1", spec, image_spec, progress=False)
    two = build_cache(data, tmp_path / "c2", spec, image_spec, workers=2, decoder="ffmpeg", progress=False)
    assert one.built == two.built == 5
    files1 = sorted(p.relative_to(tmp_path / "c1") for p in (tmp_path / "c1").rglob("*.safetensors"))
    files2 = sorted(p.relative_to(tmp_path / "c2") for p in (tmp_path / "c2").rglob("*.safetensors"))
    assert files1 == files2
    r1, r2 = CacheReader(tmp_path / "c1"), CacheReader(tmp_path / "c2")
    for i in range(4):
        (a, ma), (b, mb) = r1.load(tmp_path / f"w{i}.mp4", spec), r2.load(tmp_path / f"w{i}.mp4", spec)
        assert np.array_equal(a, b)
        assert ma.frames_indices == mb.frames_indices
        assert (ma.video_backend, mb.video_backend) == ("pyav", "ffmpeg")


def test_unusable_dataset_file_is_a_clear_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "c")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err
    (tmp_path / "d.csv").write_text("a,b\n")
    assert main(["build", str(tmp_path / "d.csv"), "--out", str(tmp_path / "c")]) == 2
    assert "unsupported dataset format" in capsys.readouterr().err
