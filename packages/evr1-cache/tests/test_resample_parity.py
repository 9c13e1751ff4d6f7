"""Cached pixels against the real reference, bit for bit: torchvision 0.28's `resize` on torch 2.13 (what qwen-vl-utils
0.0.14's `fetch_video` calls) over a grid of sizes, aspect ratios and contents, and `fetch_video` itself end to end on
every real and generated test video. Images against `fetch_image` (Pillow).

Runs in `nox -s spec_parity` (a pip venv with the CPU torch, torchvision through testenv's shim, torchcodec 0.13 as
fetch_video's decoder), where EVR1_SPEC_PARITY=1 turns a missing dependency into a failure; elsewhere it is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from evr1_cache import ImageSpec, SamplingSpec, decode_video, load_image, resample, resized_hw
from evr1_cache.testing import make_synthetic_image, make_synthetic_video, reference_module

torch = reference_module("torch")
tvF = reference_module("torchvision.transforms.functional")
vp = reference_module("qwen_vl_utils.vision_process")

#: torch's AVX2 / AVX-512 kernels fuse multiply-adds, its portable one does not: which one this CPU runs.
FUSED = torch.backends.cpu.get_cpu_capability() != "DEFAULT"
RULE = "torchvision-bicubic-aa" if FUSED else "torchvision-bicubic-aa-nofma"

#: (H, W) inputs: tiny, odd, phone/SD/HD/FHD, extreme aspect ratios.
INPUTS = ((28, 28), (33, 47), (144, 176), (272, 640), (720, 1280))
INPUTS += ((40, 2000), (2000, 40))
#: Targets per input: the spec's own sizes under several budgets (how the cache really resizes), plus fixed ones that
#: enlarge, shrink, stretch one axis only, and change the aspect ratio from 1:4 to 4:1.
BUDGETS = ((16, 64), (128, 256), (1024, 4096))
FIXED = ((28, 28), (56, 224), (224, 56), (644, 280))
#: Inputs up to this many pixels also get the checkerboard (values on rounding ties: the expensive exact path).
BOARD_MAX = 100_000


def reference(frames: np.ndarray, h: int, w: int) -> np.ndarray:
    """fetch_video's resize: torchvision's tensor `resize` on the decoded uint8 `[T, C, H, W]` video."""
    video = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)
    out = tvF.resize(video, [h, w], interpolation=tvF.InterpolationMode.BICUBIC, antialias=True)
    return out.permute(0, 2, 3, 1).numpy()


def contents(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """Noise, a smooth natural-looking ramp and (small inputs) a checkerboard (exact values on rounding ties)."""
    noise = rng.integers(0, 256, (1, h, w, 3), dtype=np.uint8)
    smooth = np.clip(np.cumsum(rng.integers(-3, 4, (1, h, w, 3)), axis=2) + 128, 0, 255).astype(np.uint8)
    if h * w > BOARD_MAX:
        return np.concatenate([noise, smooth])
    board = ((np.indices((h, w)).sum(axis=0) % 2) * 255).astype(np.uint8)[None, :, :, None].repeat(3, axis=-1)
    return np.concatenate([noise, smooth, board])


def targets(h: int, w: int) -> list[tuple[int, int]]:
    out = set(FIXED)
    for lo, hi in BUDGETS:
        try:
            out.add(resized_hw(h, w, 8, SamplingSpec(min_pixels=lo * 784, max_pixels=hi * 784)))
        except ValueError:
            pass  # an aspect ratio the spec refuses
    return sorted(out)


def test_the_grid_equals_torchvision_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    checked = mismatched = 0
    worst: list[str] = []
    for h_in, w_in in INPUTS:
        frames = contents(h_in, w_in, rng)
        for h, w in targets(h_in, w_in):
            if h * w > 400_000:  # enlarging to more than a budget allows: never asked of the cache, slow to check
                continue
            ref = reference(frames, h, w)
            ours = resample(frames, h, w, RULE)
            checked += 1
            bad = int((ref != ours).sum())
            if bad:
                mismatched += 1
                worst.append(f"{h_in}x{w_in}->{h}x{w}: {bad} values differ")
    assert checked >= 40, checked  # the grid really ran
    assert mismatched == 0, worst[:10]


def test_the_portable_cpu_build_is_reproduced_too() -> None:
    """torch's portable kernel, in a fresh process (the CPU capability is fixed when torch is imported)."""
    if not FUSED:
        pytest.skip("this CPU has no AVX2: torch runs its portable kernel already, the grid above checked it")
    script = textwrap.dedent(
        """
        import numpy as np, torch
        from evr1_cache import resample
        assert torch.backends.cpu.get_cpu_capability() == "DEFAULT", torch.backends.cpu.get_cpu_capability()
        rng = np.random.default_rng(1)
        bad = []
        for (h_in, w_in), (h, w) in [((240, 320), (168, 224)), ((144, 176), (308, 364)), ((37, 41), (300, 28))]:
            frames = rng.integers(0, 256, (2, h_in, w_in, 3), dtype=np.uint8)
            frames[1] = np.clip(np.cumsum(rng.integers(-3, 4, (h_in, w_in, 3)), axis=1) + 128, 0, 255)
            # torchvision's tensor resize, as the grid above checks it: float32 kernel, clamp, round half to even
            video = torch.from_numpy(frames).permute(0, 3, 1, 2).float()
            out = torch.nn.functional.interpolate(video, size=[h, w], mode="bicubic", align_corners=False,
                                                  antialias=True)
            ref = out.clamp(0, 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
            plain = int((resample(frames, h, w, "torchvision-bicubic-aa-nofma") != ref).sum())
            fused = int((resample(frames, h, w, "torchvision-bicubic-aa") != ref).sum())
            bad.append((plain, fused))
        print(bad)
        assert all(p == 0 for p, _ in bad), bad
        assert any(f > 0 for _, f in bad), "the two builds never differ here: the fused rule would not be needed"
        """
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "EVR1_SPEC_PARITY": "1"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("generated")
    return [
        make_synthetic_video(d / "gen_h264.mp4", 60, 30.0, (640, 360), crf=23),
        make_synthetic_video(d / "gen_portrait.mkv", 30, 15.0, (272, 480), codec="mjpeg", pix_fmt="yuvj420p"),
    ]


#: fetch_video's decoder (torchcodec, on the system's FFmpeg libraries) decodes other pixels here: FFmpeg 5's x86 MMX
#: IDCT, which it picks when decoding is not asked to be bit-exact, rounds differently from the C one that evr1's
#: bit-exact decoding (and FFmpeg >= 7, which dropped the MMX code) uses. The frames are the same ones; P-frames differ
#: by up to 2 levels on a few hundred values each. See docs/cache.md.
IDCT_DIFFERS = {"vtest.avi": 2}
#: MPEG-4 ASP AVIs with packed B-frames, whose decoded pts swap neighbours (1, 2, 3, 5, 4, 6, 8, 7, ...): torchcodec's
#: sequential decoding returns decoder output order (evr1's frames), its seeking to sparse indices (what fetch_video
#: asks for) returns other frames for most of them, in exact and approximate seek mode alike. See docs/cache.md.
SEEK_DIFFERS = {"Megamind.avi", "Megamind_bugy.avi"}
#: torchcodec cannot scan it ("Could not seek file to pts=0"): fetch_video falls back to its torchvision reader, whose
#: fps is frames / stream duration (15.0075 for this 15 fps clip); frames, indices and pixels still equal.
FALLBACK_READER = {"gen_portrait.mkv"}
FETCH_FAILS = {"blue.mpg"}  # torchcodec cannot seek in it, and torchvision 0.28 has no read_video to fall back to


def system_ffmpeg_frames(path: Path, indices: list[int], bitexact: bool) -> np.ndarray:
    """The frames at decode positions `indices` by the system ffmpeg CLI (the FFmpeg build torchcodec loads here)."""
    import av

    with av.open(str(path)) as c:
        w, h = c.streams.video[0].codec_context.width, c.streams.video[0].codec_context.height
    select = "+".join(f"eq(n\\,{i})" for i in sorted(set(indices)))
    cmd = ["ffmpeg", "-v", "error", "-nostdin", *(["-flags", "+bitexact"] if bitexact else []), "-i", str(path),
           "-vf", f"select={select}", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:"]  # fmt: skip
    out = np.frombuffer(subprocess.run(cmd, capture_output=True, check=True).stdout, np.uint8).reshape(-1, h, w, 3)
    at = {p: i for i, p in enumerate(sorted(set(indices)))}
    return out[[at[p] for p in indices]]


def test_every_test_video_equals_fetch_video(
    real_videos: list[Path],
    awkward_videos: dict[str, Path],
    generated: list[Path],
    spec: SamplingSpec,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Frames, indices, fps and pixels equal `fetch_video`'s on every test video, the variable-rate Cinepak AVI with a
    lying header included (frame i is the i-th frame, fps = frames / duration, as torchcodec counts them). Where
    fetch_video's decoder is itself inconsistent, evr1's frames equal what it decodes sequentially (SEEK_DIFFERS) or
    with the bit-exact IDCT (IDCT_DIFFERS), and the difference is pinned."""
    import evr1_cache.decode
    from evr1_cache.resampling import ResizeStream

    monkeypatch.setattr(vp, "FORCE_QWENVL_VIDEO_READER", "torchcodec")  # fetch_video's decoder, as EasyVideoR1 runs it
    monkeypatch.setenv("TORCHCODEC_NUM_THREADS", "2")
    vp.get_video_reader_backend.cache_clear()
    natives: list[np.ndarray] = []

    class Keep(ResizeStream):
        def add(self, frame: np.ndarray) -> None:
            natives.append(frame)  # what evr1's decoder produced, before resizing
            super().add(frame)

    monkeypatch.setattr(evr1_cache.decode, "ResizeStream", Keep)
    table = []
    for path in [*real_videos, *awkward_videos.values(), *generated]:
        natives.clear()
        ours, meta = decode_video(path, spec)
        mine = np.stack(natives)
        assert np.array_equal(reference(mine, *ours.shape[1:3]), ours), f"{path.name}: resize differs from torchvision"
        ele = {"video": str(path), "fps": spec.fps, "max_frames": spec.max_frames}
        ele |= {"min_pixels": spec.min_pixels, "max_pixels": spec.max_pixels}
        if path.name in FETCH_FAILS:
            with pytest.raises(Exception):
                vp.fetch_video(ele)
            table.append((path.name, "fetch_video cannot read it"))
            continue
        ref, ref_meta = vp.fetch_video(ele, return_video_metadata=True)
        ref = ref.permute(0, 2, 3, 1).numpy()
        indices = list(meta.frames_indices)
        assert list(ref_meta["frames_indices"]) == indices, path.name
        assert ref_meta["total_num_frames"] == meta.total_num_frames, path.name
        if path.name not in FALLBACK_READER:
            assert meta.fps == pytest.approx(ref_meta["fps"], rel=1e-9), path.name
        assert ref.shape == ours.shape, path.name
        diff = np.abs(ref.astype(np.int16) - ours.astype(np.int16))  # not uint8: it wraps
        from torchcodec.decoders import VideoDecoder

        if path.name in SEEK_DIFFERS:
            decoder = VideoDecoder(str(path))
            sparse = decoder.get_frames_at(indices=indices).data.permute(0, 2, 3, 1).numpy()
            assert np.array_equal(reference(sparse, *ours.shape[1:3]), ref), path.name  # fetch_video's frames
            # sequentially (every frame up to the last but one sampled: asked for all 270, torchcodec fails on the last)
            dense = decoder.get_frames_at(indices=list(range(indices[-2] + 1))).data.permute(0, 2, 3, 1).numpy()
            assert np.array_equal(dense[indices[:-1]], mine[:-1]), f"{path.name}: sequential torchcodec differs"
            same = sum(np.array_equal(a, b) for a, b in zip(sparse, mine, strict=True))
            assert same <= len(indices) // 4, f"{path.name}: seeking agrees now on {same}; expect maxdiff 0 here"
            table.append(
                (path.name, f"torchcodec seeks to other frames: {same}/{len(indices)} equal (max {int(diff.max())})")
            )
        elif path.name in IDCT_DIFFERS:
            theirs = VideoDecoder(str(path)).get_frames_at(indices=indices).data.permute(0, 2, 3, 1).numpy()
            assert np.array_equal(theirs, system_ffmpeg_frames(path, indices, bitexact=False)), path.name
            assert np.array_equal(mine, system_ffmpeg_frames(path, indices, bitexact=True)), path.name
            assert not np.array_equal(theirs, mine), f"{path.name}: decoders agree now; expect maxdiff 0 here"
            assert 0 < int(diff.max()) <= IDCT_DIFFERS[path.name], path.name
            table.append((path.name, f"IDCT differs: max {int(diff.max())} on {(diff > 0).mean():.3%} of values"))
        else:
            assert int(diff.max()) == 0, f"{path.name}: max abs diff {int(diff.max())} vs fetch_video"
            table.append((path.name, "maxdiff 0"))
    print("\n".join(f"{name:26} {what}" for name, what in table))
    assert len(table) == len(real_videos) + len(awkward_videos) + len(generated)


@pytest.mark.parametrize(("w", "h"), [(300, 200), (97, 1203), (2000, 90), (33, 33)])
def test_images_equal_fetch_image(tmp_path: Path, w: int, h: int) -> None:
    img = make_synthetic_image(tmp_path / f"i{w}x{h}.png", (w, h), index=w)
    spec = ImageSpec(min_pixels=16 * 784, max_pixels=256 * 784)
    ref = np.asarray(vp.fetch_image({"image": str(img), "min_pixels": spec.min_pixels, "max_pixels": spec.max_pixels}))
    assert np.array_equal(load_image(img, spec), ref)
