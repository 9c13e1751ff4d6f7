"""`evr1-cache probe|inspect|verify` and `--help`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evr1_cache.cli import main
from evr1_cache.spec import ImageSpec, SamplingSpec
from evr1_cache.testing import make_synthetic_video
from evr1_cache.verify import verify_cache


def test_help_shows_an_example() -> None:
    out = subprocess.run([sys.executable, "-m", "evr1_cache.cli", "build", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "evr1-cache build data/train.jsonl --out cache/" in out.stdout
    assert "--world-size" in out.stdout
    assert "--image-max-pixels" in out.stdout


def test_probe_prints_measured_facts(clip: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", str(clip)]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["total_num_frames"], facts["fps"], facts["width"], facts["height"]) == (75, 25.0, 160, 120)
    assert main(["probe", str(clip.parent / "missing.mp4")]) == 1
    assert "file not found" in capsys.readouterr().err


def _cache(tmp_path: Path, clip: Path) -> Path:
    from evr1_cache.build import build_cache

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"videos": [str(clip)], "problem": "p"}) + "\n")
    spec = SamplingSpec(max_frames=8, min_pixels=16 * 28 * 28, max_pixels=32 * 28 * 28)
    # the shared clip lives outside this test's folder: read it with the explicit opt-out
    assert build_cache(data, tmp_path / "c", spec, ImageSpec(), progress=False, allow_outside_media=True).ok
    return tmp_path / "c"


def test_inspect_and_verify(tmp_path: Path, clip: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = _cache(tmp_path, clip)
    entry = next((cache / "videos").rglob("*.safetensors"))
    assert main(["inspect", str(entry)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["dtype"] == "uint8"
    assert shown["shape"][0] == len(shown["meta"]["frames_indices"]) == 6
    assert shown["source"]["path"] == str(clip)
    assert shown["kind"] == "video"
    assert main(["verify", str(cache)]) == 0
    assert "1 entries" in capsys.readouterr().out

    # damage: a truncated entry, a foreign file at an entry path, a leftover temp file
    data = entry.read_bytes()
    entry.write_bytes(data[:-10])
    stray = entry.parent / ("0" * 32 + ".safetensors")
    stray.write_bytes(data)  # valid file at a path its key does not give
    (entry.parent / f".{entry.stem}.host.123.tmp").write_bytes(data[:100])
    assert main(["verify", str(cache)]) == 1
    out = capsys.readouterr().out
    assert out.count("BAD ") == 2  # the truncated entry and the stray
    assert "truncated" in out
    assert "TEMP" in out
    rep = verify_cache(cache)
    assert len(rep.corrupt) == 2
    assert len(rep.temp_files) == 1
    assert main(["inspect", str(entry)]) == 1
    assert main(["verify", str(cache), "--delete"]) == 1
    assert main(["verify", str(cache)]) == 0


def test_verify_checks_metadata_against_frames(tmp_path: Path, clip: Path) -> None:
    from evr1_cache.store import read_entry, write_entry

    cache = _cache(tmp_path, clip)
    entry = next((cache / "videos").rglob("*.safetensors"))
    frames, header = read_entry(entry)
    write_entry(entry, frames[:-1], header)  # one frame fewer than frames_indices
    rep = verify_cache(cache)
    assert len(rep.corrupt) == 1
    assert "metadata says" in rep.corrupt[0][1]


def test_verify_flags_entry_at_wrong_key(tmp_path: Path) -> None:
    clip = make_synthetic_video(tmp_path / "x.mp4", 20, 10.0, (64, 48))
    cache = _cache(tmp_path, clip)
    entry = next((cache / "videos").rglob("*.safetensors"))
    moved = cache / "videos" / "0000000000000000" / entry.parent.name / entry.name
    moved.parent.mkdir(parents=True)
    entry.rename(moved)
    rep = verify_cache(cache)
    assert len(rep.corrupt) == 1
    assert "does not match" in rep.corrupt[0][1]


def test_build_counts_every_line_and_names_the_rows_of_a_failed_media_file(
    tmp_path: Path, clip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 5-line file with one malformed line is 5 rows (1 malformed); a missing video is reported with the lines of
    the rows that use it."""
    rows = [{"videos": [str(clip)], "problem": "p"}, {"videos": ["gone.mp4"], "problem": "q"}]
    lines = [json.dumps(rows[0]), json.dumps(rows[1]), "{torn", json.dumps(rows[0]), json.dumps(rows[1])]
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(lines) + "\n")
    args = ["build", str(data), "--out", str(tmp_path / "c"), "--max-frames", "4", "--no-progress"]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "rows 5 (1 malformed) |" in captured.out
    failed = [line for line in captured.err.splitlines() if "gone.mp4" in line]
    assert len(failed) == 1
    assert failed[0].endswith("(used by d.jsonl line 2, 5)")


@pytest.mark.parametrize("timeline", ["reference", "presentation"])
def test_build_counts_variable_rate_videos_and_names_the_timeline(
    tmp_path: Path, clip: Path, capsys: pytest.CaptureFixture[str], timeline: str
) -> None:
    times = [0.0, 0.04, 0.08, 1.0, 1.04, 2.5, 2.54, 2.58, 3.9, 3.94]
    vfr = make_synthetic_video(tmp_path / "vfr.mp4", len(times), 25.0, (96, 64), timestamps=times)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"videos": [str(v)], "problem": "p"}) + "\n" for v in (clip, vfr)))
    out = tmp_path / "c"
    args = ["build", str(data), "--out", str(out), "--max-frames", "4", "--no-progress", "--timeline", timeline]
    assert main([*args, "--media-root", str(clip.parent.parent)]) == 0  # the shared clip lies beside tmp_path
    assert f"variable-rate videos 1 of 2 built | timeline {timeline} " in capsys.readouterr().out
    index = [json.loads(line) for line in next((out / "index").glob("*.jsonl")).read_text().splitlines()]
    assert sorted(r["vfr"] for r in index) == [False, True]
    from evr1_cache.store import read_header

    specs = [json.dumps(read_header(p)[0]) for p in (out / "videos").rglob("*.safetensors")]
    assert len(specs) == 2
    assert all(("timeline" in s) == (timeline == "presentation") for s in specs)  # the entries' stored spec
