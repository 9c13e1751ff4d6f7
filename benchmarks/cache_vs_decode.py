"""Per-sample input preparation: qwen-vl-utils `fetch_video` (on-the-fly decoding, as EasyVideoR1 does it) vs
`CacheReader.load_torch` (evr1-cache), on the same videos and settings, with the max pixel difference; the resize
alone (evr1's exact numpy resampler vs Pillow's bicubic vs torchvision's, one thread each, on the same decoded frames);
cache build time vs a bare `ffmpeg` decode to /dev/null, the build's decoding stage by stage (probe, decode + RGB,
decode + overlapped resize), `--workers 2` scaling, and bytes per cached minute. Prints
medians and ratios.

Needs torch + torchvision + qwen-vl-utils (+ torchcodec 0.13 as its decoder) beside evr1-cache, e.g. a pip venv:
    python3 -m venv .venvs/cache-bench && .venvs/cache-bench/bin/pip install torch==2.13.0
    .venvs/cache-bench/bin/pip install --no-deps torchvision==0.28.0 torchcodec==0.13.0
    .venvs/cache-bench/bin/pip install qwen-vl-utils==0.0.14 -e packages/evr1-cache
(on a CPU-only torch add the torchvision shim of testenv/, see noxfile.install_torchvision_shim). Example:
    .venvs/cache-bench/bin/python benchmarks/cache_vs_decode.py --runs 5 --json bench.json
or, in one command that builds that venv (shim included) and runs the script with the arguments after `--`:
    uvx nox -s bench_cache -- --runs 5 --json bench.json

"Cold" drops the page cache of the files involved before each run (posix_fadvise DONTNEED): for fetch_video the video;
for `load_torch(video, spec)` the cache entry and the video (whose first/middle/last MiB give its identity; the
identity memo is cleared too); for "ref cold" only the entry, loaded with `CacheReader.entry_at` by the reference
`build` wrote into the output dataset (what training uses), which never touches the video.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FPS, MAX_FRAMES = 2.0, 64
MIN_PIXELS, MAX_PIXELS = 128 * 28 * 28, 256 * 28 * 28


def evict(*paths: Path) -> None:
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def timed(
    fn: Callable[[], Any],
    runs: int,
    before: Callable[[], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, Any]:
    """Median seconds (wall, or `clock`) of `runs` calls (one untimed warm-up call first), and the last result."""
    result = fn()
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        t0 = clock()
        result = fn()
        times.append(clock() - t0)
    return statistics.median(times), result


#: The awkward AVIs `--avis` adds to the load comparison (the build set stays the 8 videos above, for comparable ratios).
AVIS = ("tree.avi", "vtest.avi", "Megamind.avi", "Megamind_bugy.avi")


def _real_test_videos() -> Callable[..., list[Path]]:
    import runpy  # testenv/ is the test environment's, not an installed package

    path = Path(__file__).parents[1] / "testenv" / "real_videos.py"
    fn: Callable[..., list[Path]] = runpy.run_path(str(path))["real_test_videos"]
    return fn


def make_videos(work: Path) -> list[Path]:
    from evr1_cache.testing import make_synthetic_video

    real = _real_test_videos()(work / "real")
    gen = work / "generated"
    specs = [("gen_720p_10s.mp4", 300, 30.0, (1280, 720)), ("gen_480p_20s.mp4", 600, 30.0, (854, 480))]
    made = []
    for name, n, fps, size in specs:
        path = gen / name
        if not path.exists():
            make_synthetic_video(path, n, fps, size, crf=23)
        made.append(path)
    return [*real, *made]


def fetch_video_fn(path: Path) -> Callable[[], Any]:
    import qwen_vl_utils.vision_process as vp

    ele = {"video": str(path), "fps": FPS, "max_frames": MAX_FRAMES, "min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS}
    return lambda: vp.fetch_video(dict(ele))


def cpu_seconds() -> float:
    """user + sys of this process (all threads) and of its reaped children (ffmpeg, worker processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def ffmpeg_null(paths: list[Path], threads: int = 0) -> tuple[float, float]:
    """(wall, CPU) seconds of a bare full decode of `paths` to the null muxer."""
    c0, t0 = cpu_seconds(), time.perf_counter()
    for p in paths:
        cmd = ["ffmpeg", "-v", "error", "-nostdin", "-threads", str(threads), "-i", str(p), "-map", "0:v:0"]
        subprocess.run([*cmd, "-f", "null", "-"], check=True)
    return time.perf_counter() - t0, cpu_seconds() - c0


def build_set(
    paths: list[Path], out: Path, spec: Any, workers: int, decoder: str = "auto", threads: int | None = None
) -> tuple[float, float]:
    """(wall, CPU) seconds of a fresh single-rank build of `paths`."""
    from evr1_cache import ImageSpec, build_cache

    data = out.with_suffix(".jsonl")
    data.write_text("".join(json.dumps({"videos": [str(p)], "problem": "bench"}) + "\n" for p in paths))
    shutil.rmtree(out, ignore_errors=True)
    c0, t0 = cpu_seconds(), time.perf_counter()
    report = build_cache(
        data, out, spec, ImageSpec(), workers=workers, decoder=decoder, threads=threads, progress=False,
        allow_outside_media=True,  # the clips are the benchmark's own inputs, wherever they lie
    )  # fmt: skip
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    if not report.ok:
        raise RuntimeError(f"build failed: {report.errors}")
    return seconds, cpu


def compare_loads(videos: list[Path], spec: Any, work: Path, runs: int) -> dict[str, Any]:
    """fetch_video vs CacheReader per video, warm and cold; returns rows + medians."""
    import numpy as np

    from evr1_cache import CacheReader
    from evr1_cache.sources import clear_identity_memo

    cache = work / "cache"
    build_set(videos, cache, spec, 1)
    reader = CacheReader(cache)
    rows = []
    head = f"{'video':24} {'frames':>14} {'fetch warm':>11} {'fetch cold':>11} {'cache warm':>11} {'cache cold':>11}"
    print(head + f" {'ref cold':>10} {'x warm':>8} {'x cold':>8} {'x refcold':>9} {'maxdiff':>7} {'differ':>7}")
    for path in videos:
        entry = reader.path_for(path, spec)
        fetch = fetch_video_fn(path)
        fw, ref = timed(fetch, runs)
        fc, _ = timed(fetch, runs, before=lambda p=path: evict(p))

        def load(p: Path = path) -> Any:
            return reader.load_torch(p, spec)

        def cold(p: Path = path, e: Path = entry) -> None:
            clear_identity_memo()
            evict(p, e)

        cw, (frames, meta) = timed(load, runs)
        cc, _ = timed(load, runs, before=cold)
        # by the reference the build wrote into the output dataset: the source video is not touched at all
        ref_rel = entry.relative_to(cache).as_posix()
        rc, _ = timed(lambda r=ref_rel: reader.entry_at(r, spec).torch(), runs, before=lambda e=entry: evict(e))
        ours = frames.permute(0, 3, 1, 2)
        same_shape = tuple(ref.shape) == tuple(ours.shape)
        delta = (ref.round().clamp(0, 255) - ours.float()).abs() if same_shape else None
        diff = int(delta.max()) if delta is not None else -1
        share = float((delta > 0).float().mean()) if delta is not None else float("nan")
        row = {
            "video": path.name,
            "frames": f"{ours.shape[0]}x{ours.shape[2]}x{ours.shape[3]}",
            "same_shape_as_fetch_video": same_shape,
            "max_abs_diff_vs_fetch_video": diff,
            "share_of_values_differing": share,
            "fetch_warm_s": fw,
            "fetch_cold_s": fc,
            "cache_warm_s": cw,
            "cache_cold_s": cc,
            "cache_ref_cold_s": rc,
            "speedup_warm": fw / cw,
            "speedup_cold": fc / cc,
            "speedup_ref_cold": fc / rc,
            "duration_s": meta.duration,
            "entry_bytes": entry.stat().st_size,
            "frame_bytes": int(np.prod(frames.shape)),
        }
        rows.append(row)
        print(
            f"{path.name[:24]:24} {row['frames']:>14} {fw * 1e3:9.1f}ms {fc * 1e3:9.1f}ms {cw * 1e3:9.2f}ms "
            f"{cc * 1e3:9.2f}ms {rc * 1e3:8.2f}ms {row['speedup_warm']:7.0f}x {row['speedup_cold']:7.0f}x "
            f"{row['speedup_ref_cold']:8.0f}x {diff:7d} {share:7.2%}"
        )
    summary = {k: statistics.median(r[k] for r in rows) for k in ("speedup_warm", "speedup_cold", "speedup_ref_cold")}
    print(
        f"median speed-up of cached input preparation over fetch_video: warm {summary['speedup_warm']:.0f}x, "
        f"cold {summary['speedup_cold']:.0f}x (cold by dataset reference: {summary['speedup_ref_cold']:.0f}x)"
    )
    total_dur = sum(r["duration_s"] for r in rows)
    total_bytes = sum(r["entry_bytes"] for r in rows)
    per_min = total_bytes / (total_dur / 60)
    print(
        f"cache size: {total_bytes / 2**20:.1f} MiB for {total_dur / 60:.2f} min of video = {per_min / 2**20:.1f} MiB "
        f"per cached minute at these settings; entry overhead over the raw uint8 frames: "
        f"{total_bytes - sum(r['frame_bytes'] for r in rows)} bytes in total"
    )
    return {"rows": rows, **summary, "bytes_per_minute": per_min}


def compare_builds(videos: list[Path], spec: Any, work: Path, runs: int, configs: list[tuple]) -> dict[str, Any]:
    """Bare `ffmpeg -f null` vs `build_cache` variants; wall and CPU seconds (CPU is what other load on a shared
    machine disturbs least), interleaved so that slow phases of the machine hit every variant alike."""
    samples: dict[str, list[tuple[float, float]]] = {"ffmpeg -f null": []}
    for _ in range(runs):
        samples["ffmpeg -f null"].append(ffmpeg_null(videos))
        for label, workers, decoder, threads in configs:
            out = work / f"b-{workers}-{decoder}-{threads}"
            samples.setdefault(label, []).append(build_set(videos, out, spec, workers, decoder, threads))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in samples.items()}
    for label, workers, _decoder, _threads in configs:
        if workers > 1:  # worker processes are children of the (never reaped) forkserver: their CPU is not seen
            med[label] = (med[label][0], float("nan"))
    base_w, base_c = med["ffmpeg -f null"]
    title = f"full decode / build of {len(videos)} videos"
    print(f"{title:40} {'wall':>8} {'x ffmpeg':>9} {'CPU':>8} {'x ffmpeg':>9}")
    for label, (w, c) in med.items():
        cpu = f"{c:7.2f}s {c / base_c:8.2f}x" if c == c else f"{'n/a':>8} {'n/a':>9}"  # NaN: CPU not observable
        print(f"{label:40} {w:7.2f}s {w / base_w:8.2f}x {cpu}")
    return med


def compare_resizes(videos: list[Path], spec: Any, runs: int) -> dict[str, Any]:
    """The resize alone, on the same decoded frames, one thread each: evr1's exact resampler (the spec's video rule)
    vs Pillow's 8-bit bicubic (what evr1 used before: not the reference's pixels) vs the reference itself
    (torchvision's resize on the uint8 tensor, as `fetch_video` calls it). Also checks that evr1's frames equal it.
    Timed in CPU seconds of the calling thread (all three run in it), which other load on the machine disturbs least."""
    import numpy as np
    import torch
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as tvf

    from evr1_cache import probe, resample
    from evr1_cache.decode import plan
    from evr1_cache.decoders import get_decoder

    torch.set_num_threads(1)
    print(
        f"{'resize, CPU s, 1 thread':24} {'in -> out':>22} {'evr1':>9} {'Pillow':>9} {'torch':>9} {'x Pillow':>8} {'x torch':>8}"
    )
    rows, totals = [], {"evr1": 0.0, "pillow": 0.0, "torch": 0.0}
    for path in videos:
        info = probe(path)
        indices, h, w = plan(info, spec)
        native = np.stack(get_decoder("auto").decode(info, info.positions(indices), threads=1))
        tensor = torch.from_numpy(native).permute(0, 3, 1, 2)

        def reference(t: Any = tensor, hw: tuple[int, int] = (h, w)) -> Any:
            return tvf.resize(t, list(hw), interpolation=InterpolationMode.BICUBIC, antialias=True)

        cpu = time.thread_time
        te, ours = timed(lambda a=native, hw=(h, w): resample(a, *hw, spec.resize, threads=1), runs, clock=cpu)
        tp, _ = timed(lambda a=native, hw=(h, w): resample(a, *hw, "pillow-bicubic", threads=1), runs, clock=cpu)
        tt, ref = timed(reference, runs, clock=cpu)
        diff = int(np.abs(ref.permute(0, 2, 3, 1).numpy().astype(np.int16) - ours.astype(np.int16)).max())
        totals["evr1"] += te
        totals["pillow"] += tp
        totals["torch"] += tt
        shape = f"{native.shape[0]}x{native.shape[1]}x{native.shape[2]} -> {h}x{w}"
        rows.append({"video": path.name, "resize": shape, "evr1_s": te, "pillow_s": tp, "torch_s": tt,
                     "max_abs_diff_vs_torchvision": diff})  # fmt: skip
        print(f"{path.name[:24]:24} {shape:>22} {te * 1e3:7.1f}ms {tp * 1e3:7.1f}ms {tt * 1e3:7.1f}ms "
              f"{te / tp:7.2f}x {te / tt:7.2f}x  maxdiff vs torchvision {diff}")  # fmt: skip
    ratio_p, ratio_t = totals["evr1"] / totals["pillow"], totals["evr1"] / totals["torch"]
    print(
        f"resize time over all videos: evr1 {ratio_p:.2f}x Pillow's, {ratio_t:.2f}x torchvision's (CPU time, 1 thread each)"
    )
    return {"rows": rows, "totals_s": totals, "evr1_over_pillow": ratio_p, "evr1_over_torchvision": ratio_t}


def scaling_videos(work: Path, n: int = 8) -> list[Path]:
    """Distinct clips of equal cost (distinct bytes: content addressing would merge copies)."""
    from evr1_cache.testing import make_synthetic_video

    out = []
    for i in range(n):
        path = work / "scaling" / f"s{i}.mp4"
        if not path.exists():
            make_synthetic_video(path, 600, 30.0, (640, 360), gop=60 + i, crf=23)
        out.append(path)
    return out


def compare_stages(videos: list[Path], spec: Any, runs: int) -> dict[str, Any]:
    """Where a build's decoding time goes, stage by stage, on the same videos (medians of `runs`, wall and CPU seconds
    of this process and its children): the probe; a sequential decode + RGB of the sampled frames at native size (no
    resize); `decode_video`, the build's own path (decode with the resize overlapped); a bare `ffmpeg -f null`."""
    from evr1_cache import probe
    from evr1_cache.decode import decode_video, plan
    from evr1_cache.decoders import get_decoder

    def both(fn: Callable[[], Any]) -> tuple[float, float]:
        walls, cpus = [], []
        fn()
        for _ in range(runs):
            c0, t0 = cpu_seconds(), time.perf_counter()
            fn()
            walls.append(time.perf_counter() - t0)
            cpus.append(cpu_seconds() - c0)
        return statistics.median(walls), statistics.median(cpus)

    infos = [probe(v) for v in videos]
    decoder = get_decoder("auto")

    def decode_only() -> None:
        for info in infos:
            indices, _, _ = plan(info, spec)
            decoder.decode(info, info.positions(indices, spec.timeline), threads=0)

    stages = {
        "probe": both(lambda: [probe(v) for v in videos]),
        "decode + RGB, no resize": both(decode_only),
        "decode_video (decode + resize overlapped)": both(lambda: [decode_video(v, spec) for v in videos]),
        "ffmpeg -f null": both(lambda: ffmpeg_null(videos)),
    }
    print(f"{'stages over ' + str(len(videos)) + ' videos':44} {'wall':>7} {'CPU':>7}")
    for name, (wall, cpu) in stages.items():
        print(f"{name:44} {wall:6.2f}s {cpu:6.2f}s")
    return {name: {"wall_s": wall, "cpu_s": cpu} for name, (wall, cpu) in stages.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "evr1-cache-bench")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per load measurement (median reported)")
    ap.add_argument("--build-runs", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma list of phases to skip: load,resize,build,stages,scaling")
    ap.add_argument("--json", type=Path, help="also write all numbers here")
    ap.add_argument("--avis", action="store_true", help="also compare the awkward AVIs with fetch_video (load phase)")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    os.environ.setdefault("FORCE_QWENVL_VIDEO_READER", "torchcodec")

    import torch

    from evr1_cache import SamplingSpec, probe

    spec = SamplingSpec(fps=FPS, max_frames=MAX_FRAMES, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    args.work.mkdir(parents=True, exist_ok=True)
    videos = make_videos(args.work)
    print(f"settings: fps={FPS} max_frames={MAX_FRAMES} min_pixels={MIN_PIXELS} max_pixels={MAX_PIXELS}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; torch {torch.__version__}")
    result: dict[str, Any] = {"videos": [probe(v).as_dict() for v in videos]}
    if "load" not in skip:
        extra = _real_test_videos()(args.work / "real", include=AVIS) if args.avis else []
        result["load"] = compare_loads([*videos, *extra], spec, args.work, args.runs)
    if "resize" not in skip:
        result["resize"] = compare_resizes(videos, spec, args.runs)
    if "build" not in skip:
        configs = [("evr1-cache build, pyav", 1, "auto", None), ("evr1-cache build, ffmpeg CLI", 1, "ffmpeg", None)]
        result["build"] = compare_builds(videos, spec, args.work, args.build_runs, configs)
    if "stages" not in skip:
        result["stages"] = compare_stages(videos, spec, args.build_runs)
    if "scaling" not in skip:
        configs = [
            ("--workers 1 (1 decoder thread)", 1, "auto", 1),
            ("--workers 2 (1 decoder thread each)", 2, "auto", 1),
        ]
        med = compare_builds(scaling_videos(args.work), spec, args.work, args.build_runs, configs)
        speed = med["--workers 1 (1 decoder thread)"][0] / med["--workers 2 (1 decoder thread each)"][0]
        print(f"--workers 2 vs --workers 1: {speed:.2f}x faster (2.00x = linear)")
        result["scaling"] = {**med, "speedup": speed}
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
