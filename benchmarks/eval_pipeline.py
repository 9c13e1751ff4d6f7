"""Evaluation pipeline speed: the same model, engine, samples and answer lengths, fed three ways.

  (a) decode on the fly + fixed synchronous batches, the way lmms-eval evaluates (0.7.3, `vllm_chat.generate_until`):
      per batch, decode every sample's video in worker threads, submit the batch, wait until its LONGEST answer is
      done, score, write; then the next batch. lmms-eval also re-encodes every frame as a base64 PNG that vLLM decodes
      again; (a) hands the engine the decoded arrays, so (a) is, if anything, faster than lmms-eval.
  (b) evr1-cache frames + the same fixed synchronous batches: what the cache alone buys.
  (c) evr1-cache frames + asynchronous streaming, the evr1-eval runner: a bounded number of samples in flight, each
      submitted as soon as its frames are read and scored as soon as its answer is back; no batch waits for another.

Two workloads over the same samples: 3 real clips (Big Buck Bunny, bikes, cockatoo) and `--generated` long
generated 540p30 clips, timed once per length of `--clip-seconds` (default 60 and 300 s; LVBench's videos last over an
hour: a long clip is where decoding hurts),
`--questions` multiple-choice questions each (LVBench asks ~15 per video) — 200 samples by default.
  uniform      every answer exactly `--short-tokens` tokens: short-answer multiple choice.
  long-tailed  answer lengths drawn once (seeded) from a log-normal, the shape of a reasoning model's answers
               (`<think>` ... `</think>`): most are short, a few run very long (default median 96 tokens, sigma 1.0,
               clipped to 16..1536: a reasoning model's thousands of tokens scaled down to what a CPU decodes).
Every answer's length is forced per request (vLLM's `min_tokens` = `max_tokens`, EOS ignored), is the same in every
mode, and is checked against the token counts the engine reports. One engine serves every mode with the same settings;
`--concurrency` is at once the batch size of (a)/(b), the in-flight limit of (c) and the engine's `max_num_seqs`, so
no mode runs more sequences at a time than another. Each timed run gets its own media ids and system prompt, so no
run reuses another's prefix or multimodal caches; repeats rotate the order of the modes; medians are reported.

Part 2 (memory): peak RSS of 1,000-sample runs (fake backend, real frames read from the cache) at two in-flight limits
and two sizes, each in a fresh process: peak memory follows the in-flight limit, not the number of samples.

Run it in the vLLM engine venv (built, without running the tests, by `uvx nox -s eval_engines --install-only`):
    .nox/eval_engines/bin/python benchmarks/eval_pipeline.py --work .venvs/eval-pipeline
    .nox/eval_engines/bin/python benchmarks/eval_pipeline.py --work .venvs/eval-pipeline --workload long-tailed --repeats 1 --skip-rss
The default run (60 s and 300 s clips, 3 repeats of 3 modes x 2 workloads, the peak-RSS part, writing the clips) took
36 minutes on 2026-12-02 on an otherwise quiet 2-core machine (1-minute load average 3-7 during it, the benchmark
included); the six (a) runs of the 300 s clips take 20 of them. The summary ends with how the total ratio scales with
clip length and questions per video (`print_scaling`): measured at each timed length, and a model fitted on the
longest one. The generated clips are written once into --work (31 s for the seven 60 s clips, 193 s for the seven
300 s clips in that run) and reused. `--modes bc --workload long-tailed --repeats 3 --skip-rss` measures the
async-only ratio alone (9 minutes on 2026-12-02, both clip lengths). Options: --backend hf (transformers),
--skip-rss / --rss-only, --json FILE, --report FILE (print the tables of an earlier --json run).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.util
import json
import math
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLING = {"fps": 2.0, "max_frames": 16, "min_pixels": 8 * 28 * 28, "max_pixels": 16 * 28 * 28}
RSS_SAMPLING = {"fps": 2.0, "max_frames": 32, "min_pixels": 256 * 28 * 28, "max_pixels": 512 * 28 * 28}
OPTIONS = ["A. a bird", "B. a rabbit", "C. a bicycle", "D. a digit"]
MODES = (
    ("a", "(a) decode + fixed batches"),
    ("b", "(b) cache + fixed batches"),
    ("c", "(c) cache + async streaming"),
)
WORKLOADS = ("uniform", "long-tailed")
#: What the engine processes need when this script is started directly rather than from a nox session.
ENGINE_ENV = {
    # One OpenMP thread for the engine: a tiny model gains nothing from more, and OpenMP's spin-waiting makes a
    # multi-threaded CPU engine 10x slower and erratic whenever the cores are shared (with decoding, or other jobs).
    "OMP_NUM_THREADS": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for a tiny model, and the machine is shared
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_NO_USAGE_STATS": "1",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def engine_environment() -> None:
    """Make a direct `.nox/eval_engines/bin/python benchmarks/eval_pipeline.py` behave like the nox session.

    Below Python 3.12, setuptools' distutils shim disables itself for good once anything in the process looks for
    `pip` (evr1_cache.testing does, to fetch the real clips); the stdlib distutils is then what gets imported, and the
    `import setuptools` in torch.utils.cpp_extension (imported by vLLM's engine) fails its assertion. Telling setuptools
    to use the stdlib distutils from the start avoids that. The interpreter's own bin/ goes first on PATH, as nox puts
    it, for the engine's helper processes.
    """
    if sys.version_info < (3, 12):
        os.environ.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")
    bin_dir = str(Path(sys.executable).parent)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != bin_dir:
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    for key, value in ENGINE_ENV.items():
        os.environ.setdefault(key, value)


# -- data -------------------------------------------------------------------------------------------------------------
def make_dataset(work: Path, questions: int, generated: int, seconds: int) -> Path:
    """Annotation JSON (EasyVideoR1 layout) over real + generated videos of `seconds`; returns the annotations dir
    (one per clip length; the media folder is shared)."""
    import runpy  # testenv/ is the test environment's, not an installed package

    from evr1_cache.testing import make_synthetic_video

    real_test_videos = runpy.run_path(str(Path(__file__).parents[1] / "testenv" / "real_videos.py"))["real_test_videos"]

    media = work / "media"
    media.mkdir(parents=True, exist_ok=True)
    videos = real_test_videos(media, include=["bigbuckbunny.mp4", "bikes.mp4", "cockatoo.mp4"])
    for i in range(generated):
        size = (960 - 32 * i, 540 - 18 * i)  # distinct clips (different sizes -> different frames)
        path = media / f"generated{i}-{seconds}s-{size[0]}x{size[1]}.mp4"
        if not path.exists():
            t0 = time.perf_counter()
            tmp = path.with_name(f".{path.name}")
            make_synthetic_video(tmp, n_frames=30 * seconds, fps=30.0, size=size, gop=60)
            tmp.replace(path)
            print(f"wrote {path.name} ({seconds} s, 30 fps) in {time.perf_counter() - t0:.0f} s", flush=True)
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
    ann = work / f"ann-{seconds}s"
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


# -- answer lengths ---------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LengthModel:
    """How many tokens each answer has: a constant, or a clipped log-normal (seeded, drawn once per sample id)."""

    name: str
    median: int
    sigma: float = 0.0
    low: int = 1
    high: int = 1

    def draw(self, ids: Sequence[str], seed: int) -> dict[str, int]:
        if self.sigma == 0:
            return dict.fromkeys(ids, self.median)
        rng = random.Random(seed)
        mu = math.log(self.median)
        return {i: min(self.high, max(self.low, round(rng.lognormvariate(mu, self.sigma)))) for i in ids}


def describe_lengths(lengths: Sequence[int], batch: int) -> dict[str, float]:
    """Summary of a length draw, and the engine steps each schedule needs if every step costs the same.

    Fixed batches end when their longest answer does (sum over batches of the batch maximum); streaming keeps
    `batch` sequences busy (total tokens / batch), and cannot end before the longest answer does. Their ratio is the
    most that async streaming can gain.
    """
    ordered = sorted(lengths)
    total = sum(lengths)
    fixed_steps = sum(max(lengths[i : i + batch]) for i in range(0, len(lengths), batch))
    stream_steps = max(math.ceil(total / batch), ordered[-1])

    def q(p: float) -> float:
        return float(ordered[min(len(ordered) - 1, int(p * len(ordered)))])

    return {
        "mean": total / len(lengths),
        "p50": q(0.5),
        "p90": q(0.9),
        "p99": q(0.99),
        "max": float(ordered[-1]),
        "min": float(ordered[0]),
        "total": float(total),
        "fixed_steps": float(fixed_steps),
        "stream_steps": float(stream_steps),
    }


class ForcedLengths:
    """The engine behind forced answer lengths: request `id` gets exactly `lengths[id]` tokens, EOS ignored.

    Every mode talks to the engine through this, so (a), (b) and (c) generate the same tokens for the same samples.
    """

    def __init__(self, inner: Any, lengths: dict[str, int]) -> None:
        self.inner = inner
        self.name = inner.name
        self.lengths = lengths

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    def settings(self) -> dict[str, Any]:
        return dict(self.inner.settings())

    async def generate(self, request: Any, params: Any) -> Any:
        n = self.lengths[request.id]
        return await self.inner.generate(
            request, dataclasses.replace(params, max_tokens=n, min_tokens=n, ignore_eos=True)
        )


def check_lengths(mode: str, got: dict[str, int], want: dict[str, int]) -> None:
    """Fairness: every mode must have generated exactly the forced number of tokens for every sample."""
    bad = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
    if bad:
        sample = dict(list(bad.items())[:5])
        raise SystemExit(f"mode {mode}: {len(bad)} answers differ from the forced lengths (got, wanted): {sample}")


# -- the three modes ----------------------------------------------------------------------------------------------
class Isolated:
    """Keeps the timed runs from sharing the engine's caches (each starts cold, as a separate run would).

    Media ids get a per-run salt, in every mode alike: each request carries the same fields (prompt, frames, media
    id, system prompt) whatever mode sends it, so no mode pays for work another skips (without an id vLLM would hash
    every frame of every request itself). The per-run system prompt (`system_for`) makes every prompt prefix differ
    between runs.
    """

    def __init__(self, inner: Any, salt: str) -> None:
        self.inner = inner
        self.salt = salt
        self.load_s = 0.0  # time spent loading frames, summed over calls

    def load(self, sample: Any, spec: Any) -> Any:
        t0 = time.perf_counter()
        media = self.inner.load(sample, spec)
        videos = tuple(dataclasses.replace(v, key=f"{self.salt}-{v.key}") for v in media.videos)
        out = dataclasses.replace(media, videos=videos)
        self.load_s += time.perf_counter() - t0
        return out


def system_for(run: str) -> str:
    return f"You are a helpful assistant (run {run})."


async def fixed_batches(
    backend: Any, job: Any, spec: Any, media: Any, params: Any, batch: int, out: Path, system: str
) -> tuple[dict[str, int], float]:
    """Modes (a)/(b): load a batch's frames (worker threads), submit it, wait for the whole batch, score, write.

    Returns the completion tokens per sample id and the wall time spent waiting for frames."""
    from evr1_eval.backends import Request

    loop = asyncio.get_running_loop()
    tokens: dict[str, int] = {}
    loading = 0.0
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh, ThreadPoolExecutor(2) as pool:
        samples = list(job.samples)
        for start in range(0, len(samples), batch):
            chunk = samples[start : start + batch]
            t0 = time.perf_counter()
            loaded = await asyncio.gather(*(loop.run_in_executor(pool, media.load, s, spec) for s in chunk))
            loading += time.perf_counter() - t0
            requests = [
                Request(id=s.id, prompt=s.prompt, videos=m.videos, images=m.images, system=system)
                for s, m in zip(chunk, loaded, strict=True)
            ]
            gens = await asyncio.gather(*(backend.generate(r, params) for r in requests))
            for s, g in zip(chunk, gens, strict=True):
                row = job.benchmark.score(s, g.text)
                tokens[s.id] = g.completion_tokens
                fh.write(json.dumps({"id": row.id, "score": row.score}) + "\n")
                fh.flush()
    return tokens, loading


async def streamed(backend: Any, job: Any, media: Any, params: Any, in_flight: int, out: Path, system: str) -> dict:
    """Mode (c): the evr1-eval runner; returns the completion tokens per sample id from the rows it wrote."""
    from evr1_eval.results import iter_rows
    from evr1_eval.runner import RunConfig, Runner

    shutil.rmtree(out, ignore_errors=True)  # a fresh run, never a resume
    config = RunConfig(
        out_dir=out,
        params=params,
        max_in_flight=in_flight,
        sampling_overrides=SAMPLING,
        progress=False,
        system_prompt=system,
    )
    (result,) = await Runner(backend, config, media=media).run([job])
    if result.errors:
        raise SystemExit(f"mode c: {result.errors} error rows in {out}")
    return {r.id: r.completion_tokens for r in iter_rows(out / job.benchmark.name / "results.jsonl")}


async def bench_modes(args: argparse.Namespace, work: Path, seconds: int) -> dict[str, Any]:
    from evr1_cache import MediaLoader, build_cache
    from evr1_eval.backends import BackendConfig, GenerationParams, create_backend
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.jobs import image_spec_for, load_job
    from evr1_eval.runner import SampleMedia, sampling_for

    ann = make_dataset(work, args.questions, args.generated, seconds)
    model = tiny_model(work)
    bench = get_benchmark("mvbench")
    job = load_job(bench, ann, work / "media")
    spec = sampling_for(bench, SAMPLING)
    videos = sorted({s.videos[0] for s in job.samples})
    cache = work / f"cache-{seconds}s"
    rows = work / f"precompute-{seconds}s.jsonl"
    rows.write_text("".join(json.dumps({"videos": [v]}) + "\n" for v in videos))
    t0 = time.perf_counter()
    report = build_cache(
        rows, cache, spec, image_spec_for(spec), workers=1, progress=False, output_data=work / f"o-{seconds}s.jsonl"
    )
    precompute_s = time.perf_counter() - t0
    assert report.ok, report.errors

    ids = [s.id for s in job.samples]
    models = {
        "uniform": LengthModel("uniform", args.short_tokens),
        "long-tailed": LengthModel("long-tailed", args.median_tokens, args.sigma, args.min_tokens, args.max_tokens),
    }
    workloads = [w for w in WORKLOADS if args.workload in (w, "both")]
    lengths = {w: models[w].draw(ids, args.seed) for w in workloads}
    longest = max(max(v.values()) for v in lengths.values())
    params = GenerationParams(max_tokens=longest)  # each request's own length replaces this (ForcedLengths)
    config = BackendConfig(
        model=str(model),
        dtype="bfloat16",
        max_model_len=4096,
        max_num_seqs=args.concurrency,
        enforce_eager=True,
        device="cpu",
    )
    engine = create_backend(args.backend, config)
    t0 = time.perf_counter()
    await engine.start()
    start_s = time.perf_counter() - t0
    decode_media = SampleMedia(MediaLoader(None, image_spec=image_spec_for(spec)))
    cache_media = SampleMedia(MediaLoader(cache, image_spec=image_spec_for(spec)))
    results: dict[str, Any] = {
        "clip_seconds": seconds,
        "samples": len(ids),
        "videos": len(videos),
        "engine_start_s": round(start_s, 1),
        "precompute_s": round(precompute_s, 1),
        "workloads": {},
    }
    try:
        # warm-up: one short request per distinct video, so every frame shape has met the engine's kernels once
        firsts = list({s.videos[0]: s for s in job.samples}.values())
        warm_backend = ForcedLengths(engine, {s.id: 4 for s in firsts})
        warm = type(job)(benchmark=bench, samples=firsts)
        await fixed_batches(
            warm_backend,
            warm,
            spec,
            Isolated(cache_media, f"w{seconds}"),
            params,
            args.concurrency,
            work / f"w-{seconds}s.jsonl",
            f"w{seconds}",
        )
        for workload in workloads:
            want = lengths[workload]
            backend = ForcedLengths(engine, want)
            res: dict[str, Any] = {
                "lengths": describe_lengths([want[i] for i in ids], args.concurrency),
                "length_model": dataclasses.asdict(models[workload]),
                "wall_s": {k: [] for k, _ in MODES},
                "load_s": {k: [] for k, _ in MODES},
                "loadavg": {k: [] for k, _ in MODES},
            }
            for rep in range(args.repeats):
                order = [m for i in range(len(MODES)) if (m := MODES[(rep + i) % len(MODES)][0]) in args.modes]
                for mode in order:
                    run = f"{seconds}s-{workload}-{mode}{rep}"
                    media = Isolated(decode_media if mode == "a" else cache_media, run)
                    res["loadavg"][mode].append(os.getloadavg()[0])
                    t0 = time.perf_counter()
                    if mode == "c":
                        out = work / "runs" / run
                        got = await streamed(backend, job, media, params, args.concurrency, out, system_for(run))
                        waiting = media.load_s  # worker-thread time, overlapping the engine's work
                    else:
                        out_file = work / "runs" / f"{run}.jsonl"
                        got, waiting = await fixed_batches(
                            backend, job, spec, media, params, args.concurrency, out_file, system_for(run)
                        )
                    wall = time.perf_counter() - t0
                    check_lengths(mode, got, want)
                    res["wall_s"][mode].append(wall)
                    res["load_s"][mode].append(waiting)
                    print(f"[{workload}] repeat {rep + 1}/{args.repeats} mode ({mode}): {wall:.1f} s, "
                          f"frames {waiting:.1f} s, load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
            results["workloads"][workload] = res
    finally:
        await engine.close()
    return results


def print_tables(r: dict[str, Any], args: argparse.Namespace) -> None:
    n = r["samples"]
    print(f"\n## generated clips of {r.get('clip_seconds', args.clip_seconds)} s\n\nsamples: {n} ({r['videos']} videos: "
          f"3 real + {args.generated} generated 540p30 clips, {args.questions} questions each)")  # fmt: skip
    print(f"backend {args.backend}, tiny random Qwen2.5-VL (bf16, eager, OMP_NUM_THREADS="
          f"{r.get('omp_threads', '?')}); concurrency {args.concurrency} in every mode "
          f"(batch of (a)/(b) = in-flight limit of (c) = engine max_num_seqs); frames: 2 fps, <= 16 frames, "
          f"8-16 visual tokens per frame")  # fmt: skip
    print(f"engine start {r['engine_start_s']} s; cache precompute (once per dataset and spec, not timed below) "
          f"{r['precompute_s']} s")  # fmt: skip
    before, after = r.get("load_before", float("nan")), r.get("load_after", float("nan"))
    print(f"machine: {r.get('cores', '?')} cores; load average (1 min) {before:.1f} before the benchmark, "
          f"{after:.1f} after; median of {args.repeats} repeats, range in brackets")  # fmt: skip
    for workload, res in r["workloads"].items():
        lengths = res["lengths"]
        walls = {k: statistics.median(v) for k, v in res["wall_s"].items() if v}
        tokens = lengths["total"]
        print(f"\n### {workload} answers: {_length_line(res['length_model'])}")
        print(f"lengths: min {lengths['min']:.0f}, median {lengths['p50']:.0f}, mean {lengths['mean']:.0f}, "
              f"p90 {lengths['p90']:.0f}, p99 {lengths['p99']:.0f}, max {lengths['max']:.0f}; "
              f"{tokens:.0f} tokens in all, the same in every mode (checked)")  # fmt: skip
        print(f"engine steps if each costs the same: fixed batches {lengths['fixed_steps']:.0f} (each batch waits for "
              f"its longest answer), streaming {lengths['stream_steps']:.0f} -> at most "
              f"{lengths['fixed_steps'] / lengths['stream_steps']:.2f}x from streaming alone\n")  # fmt: skip
        print("| mode | wall s | samples/s | answer tokens/s | frames s | ms per engine step | load avg | vs (a) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for key, label in MODES:
            runs = res["wall_s"].get(key)
            if not runs:
                continue
            spread = f"{min(runs):.1f}-{max(runs):.1f}"
            loads = res["loadavg"][key]
            frames = statistics.median(res["load_s"][key])
            steps = lengths["stream_steps"] if key == "c" else lengths["fixed_steps"]
            per_step = 1000 * (walls[key] - (0 if key == "c" else frames)) / steps
            vs_a = f"{walls['a'] / walls[key]:.2f}x" if "a" in walls else "-"
            print(f"| {label} | {walls[key]:.1f} ({spread}) | {n / walls[key]:.2f} | {tokens / walls[key]:.0f} | "
                  f"{frames:.1f} | {per_step:.1f} | {min(loads):.1f}-{max(loads):.1f} | {vs_a} |")  # fmt: skip
        ratios = []
        for name, num, den in (
            ("cache-only (b/a)", "a", "b"),
            ("async-only (c/b)", "b", "c"),
            ("total (c/a)", "a", "c"),
        ):
            if num in walls and den in walls:
                paired = [x / y for x, y in zip(res["wall_s"][num], res["wall_s"][den], strict=True)]
                each = ", ".join(f"{r:.2f}" for r in paired)
                ratios.append(f"{name} {walls[num] / walls[den]:.2f}x (per repeat: {each})")
        print(f"\n{workload}, ratios of the medians (each repeat's own ratio after it):")
        print("\n".join(f"  {r}" for r in ratios))
    print(
        "\n'frames s' of (a)/(b) is wall time spent loading a batch's frames while the engine stood idle; of (c) it "
        "is the media threads' time, which overlaps the engine's work. 'ms per engine step' is the generation time "
        "(wall minus idle frame loading) over the engine steps the schedule needs: where it grows with the sequences "
        "per step (fixed batches run mostly near-empty steps at their tail), streaming gains less than the bound. "
        "'load avg' is the 1-minute load average at the start of each timed run (this benchmark itself adds about 2)."
    )


def scaling_parts(r: dict[str, Any], workload: str) -> dict[str, float]:
    """The parts of one run the total ratio is made of (medians, seconds): `frames_a`, the frame loading (a) waits
    for; `engine_a`, the rest of (a); `wall_c`, (c); `precompute`, the one-off cache build (not in any timed run)."""
    res = r["workloads"][workload]
    wall_a = statistics.median(res["wall_s"]["a"])
    frames_a = statistics.median(res["load_s"]["a"])
    return {"frames_a": frames_a, "engine_a": wall_a - frames_a, "wall_c": statistics.median(res["wall_s"]["c"]),
            "precompute": float(r["precompute_s"])}  # fmt: skip


def modeled_ratio(parts: dict[str, float], scale: float, questions_scale: float, with_precompute: bool) -> float:
    """Total ratio (a)/(c) at `scale` x the clip length and `questions_scale` x the questions per video: decoding
    grows with the clip (frames_a, precompute), the engine's work does not (at most 16 frames per video at any
    length); (a) decodes once per question, the cache once per video, so only a counted precompute depends on the
    questions per video."""
    num = parts["frames_a"] * scale + parts["engine_a"]
    den = parts["wall_c"] + (parts["precompute"] * scale / questions_scale if with_precompute else 0.0)
    return num / den


def print_scaling(by_length: list[dict[str, Any]], questions: int) -> None:
    """How the total ratio (c vs a) scales with clip length and questions per video: measured at each timed clip
    length, and the model of `modeled_ratio` fitted on the longest one, checked against the shorter ones."""
    timed = [r for r in by_length if all(r["workloads"][w]["wall_s"].get(m) for w in r["workloads"] for m in "ac")]
    if not timed:
        return
    print("\n## How the total ratio (c)/(a) scales\n")
    print("(a) decodes every question's video (F, grows with the clip length); the engine's work (E) does not grow "
          "with it (at most 16 frames per video). Timed ratio = (F + E_a) / E_c: larger for longer clips, down to the "
          "streaming gain E_a / E_c for short ones. Questions per video leave the timed ratio unchanged (each mode "
          "answers each question); counting the one-off cache build P (decode once per video) gives "
          "(F + E_a) / (E_c + P / q): more questions per video bring it closer to the timed ratio.\n")  # fmt: skip
    base = max(timed, key=lambda r: r["clip_seconds"])
    lengths = sorted({r["clip_seconds"] for r in timed} | {base["clip_seconds"] * 4})
    print(
        "| workload | clip s | measured (timed) | model (timed) | model + precompute, 1 q/video | "
        f"+ precompute, {questions} q/video | + precompute, {4 * questions} q/video |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for workload in base["workloads"]:
        parts = scaling_parts(base, workload)
        for seconds in lengths:
            scale = seconds / base["clip_seconds"]
            run = next((r for r in timed if r["clip_seconds"] == seconds), None)
            measured = "-"
            if run is not None:
                m = scaling_parts(run, workload)
                measured = f"{(m['frames_a'] + m['engine_a']) / m['wall_c']:.2f}x"
            cells = [modeled_ratio(parts, scale, q / questions, True) for q in (1, questions, 4 * questions)]
            print(
                f"| {workload} | {seconds} | {measured} | {modeled_ratio(parts, scale, 1.0, False):.2f}x | "
                + " | ".join(f"{c:.2f}x" for c in cells)
                + " |"
            )
    print(f"\nThe model is fitted on the {base['clip_seconds']} s run (its F, E_a, E_c, P scaled linearly with the clip "
          "length; the 3 real clips are treated like the generated ones); where another length was timed, the "
          "'measured' column checks it.")  # fmt: skip


def _length_line(model: dict[str, Any]) -> str:
    if not model["sigma"]:
        return f"every answer {model['median']} tokens"
    return (f"log-normal, median {model['median']} tokens, sigma {model['sigma']}, clipped to "
            f"{model['low']}..{model['high']}")  # fmt: skip


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
    from evr1_cache import MediaLoader
    from evr1_eval.backends import BackendConfig, GenerationParams, create_backend
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.jobs import image_spec_for
    from evr1_eval.runner import Job, RunConfig, SampleMedia, evaluate, sampling_for
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
    frames_mib = SampleMedia(MediaLoader(cache)).load(samples[0], spec).nbytes / 2**20
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


def _typed(saved: dict[str, str]) -> dict[str, Any]:
    """The options a --json file recorded (as strings), back as numbers where they are numbers."""
    out: dict[str, Any] = {}
    for key, value in saved.items():
        try:
            out[key] = int(value)
        except ValueError:
            out[key] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "evr1-eval-pipeline")
    parser.add_argument("--backend", default="vllm")
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    parser.add_argument("--questions", type=int, default=20, help="questions per video (Video-MME: 3, LVBench: ~15)")
    parser.add_argument("--generated", type=int, default=7, help="generated clips besides the 3 real ones")
    parser.add_argument("--clip-seconds", default="60,300",
                        help="comma-separated lengths of the generated clips (540p30), each timed in turn (at least "
                        "two: the summary states how the ratio scales with clip length)")  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=16, help="batch = in-flight limit = engine max_num_seqs")
    parser.add_argument("--short-tokens", type=int, default=16, help="answer length of the uniform workload")
    parser.add_argument("--median-tokens", type=int, default=96, help="median answer length, long-tailed workload")
    parser.add_argument("--sigma", type=float, default=1.0, help="log-normal sigma of the long-tailed lengths")
    parser.add_argument("--min-tokens", type=int, default=16, help="shortest long-tailed answer")
    parser.add_argument("--max-tokens", type=int, default=1536, help="longest long-tailed answer (the cap)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the length draw")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each mode (median reported)")
    parser.add_argument("--modes", default="abc", help="which modes to time, e.g. bc for the async-only ratio alone")
    parser.add_argument("--json", type=Path, help="also write every timing here")
    parser.add_argument("--report", type=Path, help="print the tables of an earlier --json file, run nothing")
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--rss-only", action="store_true")
    parser.add_argument("--rss-worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.clip_seconds = [int(x) for x in str(args.clip_seconds).split(",") if x.strip()]
    if args.rss_worker:
        cache, media, n, limit = args.rss_worker
        rss_worker(Path(cache), Path(media), int(n), int(limit))
        return
    if args.report:
        saved = json.loads(args.report.read_text())
        by_length = saved["modes"] if isinstance(saved["modes"], list) else [saved["modes"]]  # one length: older files
        recorded = argparse.Namespace(**{**vars(args), **_typed(saved["args"])})
        for runs in by_length:
            print_tables(runs, recorded)
        print_scaling(by_length, int(recorded.questions))
        return
    engine_environment()
    if args.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        sys.exit(
            "this interpreter has no vLLM: build the engine venv with `uvx nox -s eval_engines --install-only`, then "
            "run `.nox/eval_engines/bin/python benchmarks/eval_pipeline.py ...` (or pass --backend hf)"
        )
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    if not args.rss_only:
        facts = {
            "load_before": os.getloadavg()[0],
            "cores": os.cpu_count(),
            "omp_threads": os.environ["OMP_NUM_THREADS"],
        }
        by_length = []
        for seconds in args.clip_seconds:
            runs = {**asyncio.run(bench_modes(args, args.work, seconds)), **facts, "load_after": os.getloadavg()[0]}
            print_tables(runs, args)
            by_length.append(runs)
        print_scaling(by_length, args.questions)
        summary["modes"] = by_length
    if not args.skip_rss:
        if args.rss_only:
            make_dataset(args.work, 1, args.generated, args.clip_seconds[-1])
        rss = bench_rss(args.work, [250, 1000], [4, 32])
        print(
            "\n| samples | in-flight | peak RSS MiB | after imports MiB | frames/sample MiB | all frames MiB | wall s |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for x in rss:
            print(f"| {x['n']} | {x['in_flight']} | {x['peak_mib']:.0f} | {x['before_mib']:.0f} | "
                  f"{x['frames_per_sample_mib']:.1f} | {x['n'] * x['frames_per_sample_mib']:.0f} | {x['seconds']:.1f} |")  # fmt: skip
        summary["rss"] = rss
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
