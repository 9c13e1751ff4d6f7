"""Probe and decoders: true counts and times despite lying headers, VFR and rotation; both decoders frame-exact."""

from __future__ import annotations

import os
import struct
import subprocess
from collections.abc import Sequence
from pathlib import Path

import av
import numpy as np
import pytest

from evr1_cache import decode_video, probe
from evr1_cache.decoders import DECODERS, get_decoder, register
from evr1_cache.errors import MediaError
from evr1_cache.resampling import resample
from evr1_cache.spec import SamplingSpec, sample_frame_indices
from evr1_cache.testing import make_synthetic_video, read_frame_index

DECODER_NAMES = ["pyav", "ffmpeg"]


def reference_frames(path: Path, meta_indices: tuple[int, ...]) -> np.ndarray:
    """Independent decode: every frame with plain PyAV, rotated, the i-th one for index i, resized later."""
    with av.open(str(path)) as c:
        frames = list(c.decode(video=0))
    rot = (frames[0].rotation or 0) // 90
    return np.stack([np.rot90(frames[i].to_ndarray(format="rgb24"), k=rot) for i in meta_indices])


def resize(frames: np.ndarray, h: int, w: int) -> np.ndarray:
    """The spec's resize rule (its pixel parity with torchvision itself is test_resample_parity.py's job)."""
    return resample(np.ascontiguousarray(frames), h, w, SamplingSpec().resize)


@pytest.mark.parametrize("decoder", DECODER_NAMES)
def test_generated_clip_frames_are_exactly_the_sampled_indices(clip: Path, spec: SamplingSpec, decoder: str) -> None:
    frames, meta = decode_video(clip, spec, decoder)
    assert meta.total_num_frames == 75
    assert meta.fps == 25.0
    assert meta.duration == pytest.approx(3.0)
    assert meta.frames_indices == sample_frame_indices(75, 25.0, spec)
    assert frames.dtype == np.uint8
    assert frames.shape == (len(meta.frames_indices), meta.resized_height, meta.resized_width, 3)
    assert [read_frame_index(f) for f in frames] == list(meta.frames_indices)
    assert meta.video_backend == decoder
    assert meta.spec_key == spec.key()
    assert meta.source == str(clip)


def test_decoders_agree_bit_for_bit_on_generated_codecs(tmp_path: Path, spec: SamplingSpec) -> None:
    paths = [
        make_synthetic_video(tmp_path / "h264.mp4", 50, 30.0, (128, 96), gop=7),
        make_synthetic_video(tmp_path / "mpeg4.avi", 40, 15.0, (96, 64), codec="mpeg4"),
        make_synthetic_video(tmp_path / "mjpeg.mkv", 30, 10.0, (96, 64), codec="mjpeg", pix_fmt="yuvj420p"),
    ]
    for path in paths:
        a, ma = decode_video(path, spec, "pyav")
        b, mb = decode_video(path, spec, "ffmpeg")
        assert np.array_equal(a, b), path.name
        assert ma.frames_indices == mb.frames_indices
        assert [read_frame_index(f) for f in a] == list(ma.frames_indices)


def test_real_videos_cached_frames_equal_independent_decode(
    real_videos: list[Path], spec: SamplingSpec, tmp_path: Path
) -> None:
    """Build a cache from the real videos, then every cached frame must equal an independent full decode."""
    import json

    from evr1_cache import CacheReader, build_cache
    from evr1_cache.spec import ImageSpec

    assert len(real_videos) == 6
    data = tmp_path / "real.jsonl"
    data.write_text("".join(json.dumps({"videos": [str(p)], "problem": p.name}) + "\n" for p in real_videos))
    report = build_cache(data, tmp_path / "cache", spec, ImageSpec(), progress=False, allow_outside_media=True)
    assert report.ok
    assert report.built == 6
    reader = CacheReader(tmp_path / "cache")
    for path in real_videos:
        info = probe(path)
        exact = probe(path, exact=True)
        assert info.total_num_frames == exact.total_num_frames, path.name
        frames, meta = reader.load(path, spec)
        assert meta.frames_indices == sample_frame_indices(info.total_num_frames, info.fps, spec)
        picked = reference_frames(path, meta.frames_indices)
        ref = resize(picked, meta.resized_height, meta.resized_width)
        assert np.array_equal(frames, ref), path.name
        other, _ = decode_video(path, spec, "ffmpeg")
        assert np.array_equal(frames, other), path.name


def test_awkward_real_containers_probe_true_facts(awkward_videos: dict[str, Path]) -> None:
    facts = {name: probe(p) for name, p in awkward_videos.items()}
    tree = facts["tree.avi"]  # Cinepak AVI whose header claims 444 frames at 15 fps
    assert (tree.header_frames, tree.total_num_frames, tree.codec) == (444, 68, "cinepak")
    assert tree.header_mismatch
    assert tree.vfr
    assert tree.duration == pytest.approx(29.600148)  # first pts to the last frame's end, as torchcodec measures it
    assert tree.fps == pytest.approx(68 / 29.600148)
    assert (facts["Megamind.avi"].fps, facts["Megamind_bugy.avi"].fps) == (23.976, 30.0)
    assert (facts["vtest.avi"].codec, facts["vtest.avi"].total_num_frames, facts["vtest.avi"].fps) == (
        "msmpeg4",
        795,
        10.0,
    )
    assert facts["Megamind.avi"].total_num_frames == facts["Megamind_bugy.avi"].total_num_frames == 270
    blue = facts["blue.mpg"]  # MPEG-1 program stream: no duration, no frame count in any header
    assert (blue.header_frames, blue.total_num_frames, blue.fps) == (None, 24, 30.0)
    for name, p in awkward_videos.items():
        assert probe(p, exact=True).total_num_frames == facts[name].total_num_frames, name


@pytest.mark.parametrize("decoder", DECODER_NAMES)
def test_awkward_real_containers_decode_frame_exact(
    awkward_videos: dict[str, Path], spec: SamplingSpec, decoder: str
) -> None:
    """Both decoders equal an independent full PyAV decode bit for bit; the ffmpeg CLI only since both decoders ask for
    bit-exact IDCTs (MS-MPEG-4 differed by 1 before)."""
    for name, path in awkward_videos.items():
        info = probe(path)
        frames, meta = decode_video(path, spec, decoder)
        assert meta.frames_indices == sample_frame_indices(info.total_num_frames, info.fps, spec), name
        ref = resize(reference_frames(path, meta.frames_indices), *frames.shape[1:3])
        assert np.array_equal(frames, ref), name


def test_awkward_real_containers_build_and_verify(
    awkward_videos: dict[str, Path], spec: SamplingSpec, tmp_path: Path
) -> None:
    import json

    from evr1_cache import CacheReader, build_cache
    from evr1_cache.spec import ImageSpec
    from evr1_cache.verify import verify_cache

    data = tmp_path / "awkward.jsonl"
    data.write_text("".join(json.dumps({"videos": [str(p)]}) + "\n" for p in awkward_videos.values()))
    report = build_cache(data, tmp_path / "cache", spec, ImageSpec(), progress=False, allow_outside_media=True)
    assert report.ok, report.errors
    assert report.built == len(awkward_videos)
    assert verify_cache(tmp_path / "cache").ok
    frames, meta = CacheReader(tmp_path / "cache").load(awkward_videos["tree.avi"], spec)
    assert meta.total_num_frames == 68
    assert len(frames) == len(meta.frames_indices)


def test_real_video_facts(real_videos: list[Path]) -> None:
    facts = {p.name: probe(p) for p in real_videos}
    bbb = facts["bigbuckbunny.mp4"]
    assert (bbb.width, bbb.height, bbb.total_num_frames, bbb.fps) == (1280, 720, 132, 25.0)
    assert facts["cockatoo.mp4"].total_num_frames == 280
    assert facts["cockatoo.mp4"].fps == 20.0
    assert facts["carphone_pristine.mp4"].fps == pytest.approx(30000 / 1001)
    assert not any(i.vfr or i.header_mismatch for i in facts.values())


@pytest.mark.parametrize("decoder", DECODER_NAMES)
def test_variable_frame_rate_takes_the_ith_frame(tmp_path: Path, spec: SamplingSpec, decoder: str) -> None:
    times = [0.0, 0.04, 0.08, 1.0, 1.04, 2.5, 2.54, 2.58, 3.9, 3.94]
    path = make_synthetic_video(tmp_path / "vfr.mp4", len(times), 25.0, (96, 64), timestamps=times)
    info = probe(path)
    assert info.vfr
    assert info.total_num_frames == 10
    assert info.frame_times == pytest.approx(times, abs=1e-3)
    frames, meta = decode_video(path, spec, decoder)
    # frame i is the i-th frame, as torchcodec (qwen-vl-utils' reader) indexes it; fps = frames / duration
    assert [read_frame_index(f) for f in frames] == list(meta.frames_indices)
    assert meta.duration == pytest.approx(3.94 + 0.04, abs=0.02)
    assert meta.fps == pytest.approx(10 / meta.duration)


@pytest.mark.parametrize("rotation", [90, 180, 270])
@pytest.mark.parametrize("decoder", DECODER_NAMES)
def test_rotation_metadata_is_applied_like_a_player(
    tmp_path: Path, spec: SamplingSpec, rotation: int, decoder: str
) -> None:
    path = make_synthetic_video(tmp_path / f"r{rotation}.mp4", 20, 10.0, (96, 64), rotation=rotation)
    info = probe(path)
    assert info.rotation == rotation
    assert (info.width, info.height) == ((64, 96) if rotation in (90, 270) else (96, 64))
    frames, meta = decode_video(path, spec, decoder)
    assert (meta.width, meta.height) == (info.width, info.height)
    # ffmpeg's own autorotation (the CLI default) is the reference for what a player shows
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        capture_output=True,
        check=True,
    ).stdout
    shown = np.frombuffer(raw, np.uint8).reshape(20, info.height, info.width, 3)
    assert np.array_equal(frames, resize(shown[list(meta.frames_indices)], meta.resized_height, meta.resized_width))
    unrotated = [read_frame_index(np.rot90(f, k=-rotation // 90)) for f in frames]
    assert unrotated == list(meta.frames_indices)


def lying_avi(tmp_path: Path, n: int, claimed: int) -> Path:
    """An AVI whose main and stream headers claim `claimed` frames (the real file holds `n`)."""
    path = make_synthetic_video(tmp_path / "lie.avi", n, 15.0, (96, 64), codec="mpeg4")
    data = bytearray(path.read_bytes())
    avih, strh = data.find(b"avih"), data.find(b"strh")
    struct.pack_into("<I", data, avih + 8 + 16, claimed)  # dwTotalFrames
    struct.pack_into("<I", data, strh + 8 + 32, claimed)  # dwLength
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("decoder", DECODER_NAMES)
def test_header_that_lies_about_frame_count(tmp_path: Path, spec: SamplingSpec, decoder: str) -> None:
    path = lying_avi(tmp_path, 30, 444)
    with av.open(str(path)) as c:
        assert c.streams.video[0].frames == 444  # what a header-trusting reader would use
    info = probe(path)
    assert info.header_frames == 444
    assert info.total_num_frames == 30
    assert info.header_mismatch
    frames, meta = decode_video(path, spec, decoder)
    assert meta.total_num_frames == 30
    assert meta.duration == pytest.approx(2.0)
    assert [read_frame_index(f) for f in frames] == list(meta.frames_indices)


@pytest.mark.parametrize("decoder", DECODER_NAMES)
def test_edit_list_frames_the_player_never_shows_are_not_counted(
    tmp_path: Path, spec: SamplingSpec, decoder: str
) -> None:
    src = make_synthetic_video(tmp_path / "gop.mp4", 60, 30.0, (96, 64), gop=30)
    cut = tmp_path / "cut.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-ss", "0.5", "-i", str(src), "-c", "copy", str(cut)], check=True)
    frames, meta = decode_video(cut, spec, decoder)
    assert meta.total_num_frames == 45  # 60 packets, the first 15 are edit-list pre-roll
    assert [read_frame_index(f) for f in frames] == [15 + i for i in meta.frames_indices]


def test_decoder_mismatch_triggers_exact_reprobe(clip: Path, spec: SamplingSpec) -> None:
    """A stream whose packet count disagrees with the decoder is re-timed by decoding (simulated: a wrong probe)."""
    import dataclasses

    info = probe(clip)
    wrong = dataclasses.replace(info, frame_times=info.frame_times[:50], total_num_frames=50)
    frames, meta = decode_video(clip, spec, "pyav", info=wrong)
    assert meta.total_num_frames == 75
    assert [read_frame_index(f) for f in frames] == list(meta.frames_indices)


def test_registry_refuses_duplicates_and_suggests_names() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register("pyav")(lambda: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(KeyError, match="did you mean 'pyav'"):
        get_decoder("pyavv")
    assert {"pyav", "ffmpeg"} <= set(DECODERS)
    assert get_decoder("auto").name == "pyav"


class _ListOnlyDecoder:
    """A plugin decoder written against the protocol before `sink` existed: it returns one frame per position."""

    name = "list-only"

    def __init__(self) -> None:
        self._inner = get_decoder("pyav")
        self.calls = 0

    def available(self) -> bool:
        return True

    def version(self) -> str:
        return "list-only 1"

    def decode(self, info, positions, *, threads=0):  # type: ignore[no-untyped-def]
        self.calls += 1
        return self._inner.decode(info, positions, threads=threads)


def test_decoder_without_a_sink_still_works(clip: Path, spec: SamplingSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = _ListOnlyDecoder()
    monkeypatch.setitem(DECODERS, "list-only", lambda: plugin)
    frames, meta = decode_video(clip, spec, "list-only")
    expected, _ = decode_video(clip, spec, "pyav")
    assert plugin.calls == 1
    assert meta.video_backend == "list-only"
    np.testing.assert_array_equal(frames, expected)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda d: d / "missing.mp4", "file not found"),
        (lambda d: _write(d / "empty.mp4", b""), "empty"),
        (lambda d: _write(d / "text.mp4", b"this is not a video\n" * 50), "not a readable video"),
        (lambda d: (d / "folder.mp4").mkdir() or d / "folder.mp4", "a directory, not a media file"),
    ],
)
def test_bad_inputs_raise_one_clear_media_error(tmp_path: Path, spec: SamplingSpec, make, reason: str) -> None:
    path = make(tmp_path)
    with pytest.raises(MediaError, match=reason) as err:
        decode_video(path, spec)
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_truncated_mp4_and_single_frame_video(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    data = clip.read_bytes()
    trunc = _write(tmp_path / "trunc.mp4", data[: len(data) // 2])
    with pytest.raises(MediaError, match=r"trunc\.mp4"):
        decode_video(trunc, spec)
    one = make_synthetic_video(tmp_path / "one.mp4", 1, 25.0, (96, 64))
    with pytest.raises(MediaError, match=r"cannot sample frames.*1 frame"):
        decode_video(one, spec)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_unreadable_file_is_reported(tmp_path: Path, clip: Path, spec: SamplingSpec, monkeypatch) -> None:
    locked = tmp_path / "locked.mp4"
    locked.write_bytes(clip.read_bytes())
    real_open = os.open

    def deny(path, *args, **kwargs):
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    with pytest.raises(MediaError, match=r"locked\.mp4: cannot be opened \(Permission denied\)"):
        decode_video(locked, spec)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_file_by_permissions(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    locked = tmp_path / "locked.mp4"
    locked.write_bytes(clip.read_bytes())
    locked.chmod(0)
    with pytest.raises(MediaError, match="cannot be read"):
        decode_video(locked, spec)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("raw.h264", ["-c", "copy", "-f", "h264"]),  # elementary stream: no container timestamps, no frame count
        ("ps.mpg", ["-c:v", "mpeg2video", "-q:v", "2", "-f", "mpeg"]),  # MPEG-2 program stream
        ("ts.ts", ["-c:v", "libx264", "-f", "mpegts"]),  # transport stream, non-zero start time
    ],
)
def test_containers_without_reliable_headers(
    tmp_path: Path, clip: Path, spec: SamplingSpec, name: str, args: list[str]
) -> None:
    out = tmp_path / name
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(clip), *args, str(out)], check=True)
    info = probe(out)
    assert (info.total_num_frames, info.fps, info.vfr) == (75, 25.0, False)
    a, meta = decode_video(out, spec, "pyav")
    b, _ = decode_video(out, spec, "ffmpeg")
    assert np.array_equal(a, b)
    assert [read_frame_index(f) for f in a] == list(meta.frames_indices)


def _shown_at(frame_times: Sequence[float], instants: Sequence[float]) -> list[int]:
    """Independently: the frame a player shows at each instant, the last one whose time is <= it (1 ms slack)."""
    return [max(j for j, t in enumerate(frame_times) if t <= at + 1e-3) for at in instants]


@pytest.mark.parametrize("decoder", DECODER_NAMES)
def test_the_presentation_timeline_holds_the_frame_shown_at_each_label(tmp_path: Path, decoder: str) -> None:
    times = [0.0, 0.04, 0.08, 1.0, 1.04, 2.5, 2.54, 2.58, 3.9, 3.94]
    path = make_synthetic_video(tmp_path / "vfr.mp4", len(times), 25.0, (96, 64), timestamps=times)
    spec = SamplingSpec(fps=2.0, min_frames=4, max_frames=8, min_pixels=3136, max_pixels=3136)
    shown = SamplingSpec(**{**spec.to_dict(), "timeline": "presentation"})
    ref_frames, ref = decode_video(path, spec, decoder)
    frames, meta = decode_video(path, shown, decoder)
    assert meta.frames_indices == ref.frames_indices  # the same labelled instants i / fps ...
    assert meta.timestamps == ref.timestamps
    expected = _shown_at(times, meta.timestamps)
    assert [read_frame_index(f) for f in frames] == expected  # ... each holding the frame shown then
    assert expected != list(ref.frames_indices)  # where the reference timeline holds the i-th frame
    assert [read_frame_index(f) for f in ref_frames] == list(ref.frames_indices)
    assert meta.spec_key != ref.spec_key


def test_on_the_real_vfr_file_every_presentation_frame_is_the_frame_shown_at_its_timestamp(
    awkward_videos: dict[str, Path],
) -> None:
    """tree.avi (variable-rate Cinepak): the reference timeline labels several frames with instants other frames are
    shown at; the presentation timeline holds, at every label, the frame a player shows then."""
    path = awkward_videos["tree.avi"]
    with av.open(str(path)) as c:
        decoded = list(c.decode(video=0))
    first = decoded[0].time
    times = [f.time - first for f in decoded]
    spec = SamplingSpec(fps=2.0, max_frames=16, min_pixels=3136, max_pixels=12544)
    shown = SamplingSpec(**{**spec.to_dict(), "timeline": "presentation"})
    frames, meta = decode_video(path, shown, "pyav")
    assert len(meta.frames_indices) == 16
    at = _shown_at(times, meta.timestamps)
    ref_rgb = np.stack([decoded[j].to_ndarray(format="rgb24") for j in at])
    assert np.array_equal(frames, resize(ref_rgb, meta.resized_height, meta.resized_width))
    _, ref = decode_video(path, spec, "pyav")
    wrong = sum(i != j for i, j in zip(ref.frames_indices, at, strict=True))
    assert wrong > 0  # the reference timeline's i-th frame is not always the one shown at i / fps here
