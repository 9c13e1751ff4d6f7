"""The asynchronous evaluation loop: keep the engine saturated, never lose finished work.

For every pending sample (all benchmarks in one stream): take an in-flight slot, load its frames in a worker thread
(cache first, else decode), submit the request as soon as the frames are ready, score the answer the moment it comes
back, append the row to `results.jsonl` (flushed), and release the slot. At most `max_in_flight` samples hold frames
at any time, so memory is bounded by that number and not by the benchmark size. The engine does the batching
(continuous batching, chunked prefill); nothing here waits for a batch to fill.

A sample that fails (missing or broken video, engine error, timeout, scorer crash) becomes an error row and the run
goes on; only a dead engine stops it, and the rows written so far stay valid for a resume.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from evr1_cache import MediaLoader, SamplingSpec
from evr1_eval import manifest
from evr1_eval.agent import AgentEval, run_agent
from evr1_eval.backends.base import Backend, EngineDead, GenerationParams, ImageInput, Request, VideoInput
from evr1_eval.manifest import package_version
from evr1_eval.presets.registry import ResponseFilter, apply_response_filter
from evr1_eval.progress import Progress
from evr1_eval.results import (
    RESULTS_GLOB,
    ResultsStore,
    check_settings,
    dedupe_ids,
    results_path,
    select,
    settings_path,
    shard_suffix,
    write_json_atomic,
    write_summary,
)
from evr1_eval.types import (
    OFFICIAL_READING,
    BenchmarkSummary,
    Judge,
    LoadError,
    Reading,
    Reference,
    Sample,
    ScoredSample,
)
from evr1_eval.verify import Annotations, Rescorer, Verification, record_writing, record_written, verify_benchmark

log = logging.getLogger(__name__)
#: Problems a resume check logs one by one (all of them are in the run's result).
SHOWN_PROBLEMS = 20


class BenchmarkLike(Rescorer, Protocol):
    """What the runner needs from a benchmark; `evr1_eval.api.base.Benchmark` is one (a test double can be
    another): what verifying needs (name, scorer, optionally judged types), scoring with a judge, the error row of
    a failed sample, the official aggregation."""

    @property
    def prompt_version(self) -> str: ...

    @property
    def sampling(self) -> SamplingSpec: ...

    @property
    def reference(self) -> Reference | None: ...

    async def score_with_judge(
        self, sample: Sample, response: str, judge: Judge | None, *, reading: Reading = OFFICIAL_READING
    ) -> ScoredSample: ...

    def error_row(self, sample: Sample, error: str) -> ScoredSample: ...

    def aggregate(self, rows: Sequence[ScoredSample]) -> BenchmarkSummary: ...


@dataclass(frozen=True, slots=True)
class Media:
    """A sample's frames and images as backend inputs."""

    videos: tuple[VideoInput, ...]
    images: tuple[ImageInput, ...]
    #: How many videos came from the cache (the rest were decoded now).
    cache_hits: int = 0

    @property
    def nbytes(self) -> int:
        return sum(v.frames.nbytes for v in self.videos) + sum(i.pixels.nbytes for i in self.images)


class MediaSource(Protocol):
    def load(self, sample: Sample, spec: SamplingSpec) -> Media: ...


@dataclass(frozen=True, slots=True)
class SampleMedia:
    """A sample's videos (under the benchmark's spec) and images through evr1-cache's one `MediaLoader`."""

    loader: MediaLoader

    def load(self, sample: Sample, spec: SamplingSpec) -> Media:
        videos = [self.loader.video(path, spec, row=sample.id) for path in sample.videos]
        images = [self.loader.image(path, row=sample.id) for path in sample.images]
        return Media(
            videos=tuple(VideoInput(frames=v.frames, metadata=v.meta.to_hf(), key=v.key) for v in videos),
            images=tuple(ImageInput(pixels=i.pixels, key=i.key) for i in images),
            cache_hits=sum(v.cached for v in videos),
        )


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """How to run; only `params`, frame settings and the backend's `settings()` change numbers (see run.json)."""

    out_dir: Path
    params: GenerationParams = field(default_factory=GenerationParams)
    #: Samples holding frames or waiting on the engine at once: the memory bound and the engine's queue depth.
    max_in_flight: int = 16
    #: Threads that read the cache / decode videos.
    media_workers: int = 2
    #: Evaluate only the first N samples of each benchmark (before the rank split).
    limit: int | None = None
    rank: int = 0
    world_size: int = 1
    request_timeout_s: float | None = None
    #: Run error rows of a previous attempt again (default: an error row is a finished sample).
    retry_errors: bool = False
    #: Replace fields of each benchmark's SamplingSpec (fps, max_frames, max_pixels...).
    sampling_overrides: Mapping[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None
    #: Send no videos (images and text only): the "before" run of Video-MMMU's Δknowledge, which `report` pairs with a
    #: normal run. Recorded in the settings, so it never mixes with a normal run's rows.
    without_video: bool = False
    progress: bool = True
    #: Extra facts recorded in run.json's "info" (command line, annotation file...).
    info: Mapping[str, Any] = field(default_factory=dict)
    #: The preset the settings came from (`Preset.record()`), for the manifest (its settings are in the fingerprint).
    preset: Mapping[str, Any] | None = None
    #: How a response is read before scoring ("after_think": the text after the last `</think>`, as Qwen3-VL's
    #: evaluation code reads thinking models); the raw response is what `results.jsonl` keeps.
    response_filter: ResponseFilter = "none"
    #: How the official rule reads a response (`--answer-tags`, `--reasoning-tags`): default, each reference's own
    #: reading. Its non-default fields are in the fingerprint, so rows read one way never mix into a resume read another.
    reading: Reading = OFFICIAL_READING
    #: Answer with tools (`evr1_eval.agent`, `--tools`): multi-turn, every turn in the row's details["agent"].
    agent: AgentEval | None = None

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {self.max_in_flight}")
        if self.media_workers < 1:
            raise ValueError(f"media_workers must be >= 1, got {self.media_workers}")
        if self.limit is not None and self.limit < 0:
            raise ValueError(f"limit must be >= 0, got {self.limit}")
        shard_suffix(self.rank, self.world_size)  # validates rank / world_size


@dataclass(frozen=True)
class Job:
    """One benchmark's loaded samples (all of them: the runner applies limit and rank split)."""

    benchmark: BenchmarkLike
    samples: Sequence[Sample]
    #: Identity of the annotation file (hash): part of the settings, so a changed file is never mixed into a resume.
    source: str | None = None
    load_errors: Sequence[LoadError] = ()
    #: How the samples' prompts were built (`ProtocolSettings.record()`): part of the run fingerprint.
    protocol: Mapping[str, Any] = field(default_factory=lambda: {"protocol": "official", "prompt_variant": "official"})
    #: This benchmark's SamplingSpec fields from a preset or the evr1 settings; `RunConfig.sampling_overrides` (the
    #: command line) wins over them.
    sampling_overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobResult:
    benchmark: str
    out_dir: Path
    selected: int  # samples of this rank after limit + split
    skipped: int  # already finished (resume)
    ran: int
    errors: int  # error rows written in this run
    summary: BenchmarkSummary | None
    #: The stored rows re-scored and checked (evr1_eval.verify): before a resume and after the run (single machine).
    verification: Verification | None = None
    #: What the check before a resume found in the rows already on disk (each also in `verification` when run).
    resume_problems: tuple[str, ...] = ()


def sampling_for(bench: BenchmarkLike, overrides: Mapping[str, Any]) -> SamplingSpec:
    return dataclasses.replace(bench.sampling, **overrides) if overrides else bench.sampling


def _boxed(load: Callable[[Sample, SamplingSpec], Media], sample: Sample, spec: SamplingSpec) -> list[Media]:
    """`load` in a pool thread, its result in a list the event loop empties. Why: the pool's future keeps its result
    until the worker thread next holds the GIL; an emptied box frees a finished sample's frames at once, so frames in
    memory never outnumber the in-flight slots (under load, a bare result could outlive its slot)."""
    return [load(sample, spec)]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:1000]


@dataclass
class _State:
    """Per-benchmark bookkeeping during a run."""

    job: Job
    spec: SamplingSpec
    out_dir: Path
    store: ResultsStore
    pending: list[Sample]
    skipped: int
    ran: int = 0
    errors: int = 0
    resume_problems: tuple[str, ...] = ()


class Runner:
    """Runs jobs against a started backend; see the module docstring for the pipeline."""

    def __init__(
        self,
        backend: Backend,
        config: RunConfig,
        *,
        media: MediaSource | MediaLoader | None = None,
        judge: Judge | None = None,
        judge_settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.backend = backend
        self.config = config
        loader = MediaLoader() if media is None else media
        self.media: MediaSource = SampleMedia(loader) if isinstance(loader, MediaLoader) else loader
        self.judge = judge
        self.judge_settings = dict(judge_settings or {}) if judge else None

    # -- set-up -------------------------------------------------------------------------------------------------
    def fingerprint(self, job: Job, spec: SamplingSpec) -> dict[str, Any]:
        """Everything that changes a number; a resumed run must match it exactly."""
        c = self.config
        return {
            "benchmark": job.benchmark.name,
            "prompt_version": job.benchmark.prompt_version,
            "protocol": dict(job.protocol),
            "annotations": job.source,
            "sampling": {"key": spec.key(), **spec.to_dict()},
            "backend": self.backend.settings(),
            "generation": c.params.to_dict(),
            "system_prompt": c.system_prompt,
            "judge": self.judge_settings,
            "rank": c.rank,
            "world_size": c.world_size,
            **({"without_video": True} if c.without_video else {}),
            **({"response_filter": c.response_filter} if c.response_filter != "none" else {}),
            **c.reading.fingerprint(),
            **({"agent": c.agent.settings()} if c.agent is not None else {}),
        }

    def _prepare(self, job: Job) -> _State:
        c = self.config
        bench = job.benchmark
        dups = dedupe_ids(s.id for s in job.samples)
        if dups:
            raise ValueError(
                f"{bench.name}: duplicate sample ids {sorted(set(dups))[:5]}; ids must be unique to resume safely"
            )
        spec = sampling_for(bench, {**job.sampling_overrides, **c.sampling_overrides})
        out_dir = Path(c.out_dir) / bench.name
        info = {
            "evr1_eval": package_version(),
            "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "samples_in_file": len(job.samples),
            "load_errors": len(job.load_errors),
            "limit": c.limit,
            "max_in_flight": c.max_in_flight,
            **dict(c.info),
        }
        fingerprint = self.fingerprint(job, spec)
        resumed = self._check_stored(job, out_dir)  # before run.json and manifest.json are rewritten
        check_settings(settings_path(out_dir, c.rank, c.world_size), fingerprint, info)
        counts = {"rows_loaded": len(job.samples), "load_errors": len(job.load_errors)}
        record = manifest.build(
            fingerprint,
            preset=c.preset,
            reference=str(job.benchmark.reference or ""),
            annotations=counts,
            extra={"command": c.info.get("command"), "limit": c.limit, "world_size": c.world_size},
        )
        previous = manifest.read(out_dir) or {}
        kept = {k: previous[k] for k in ("files", "writing") if k in previous}  # other ranks' records, and ours
        write_json_atomic(out_dir / manifest.MANIFEST, {**record, **kept})
        record_writing(out_dir, self._own_files(out_dir))
        if job.load_errors:
            write_json_atomic(
                out_dir / f"load_errors{shard_suffix(c.rank, c.world_size)}.json",
                [{e.unit: e.row, "id": e.id, "reason": e.reason} for e in job.load_errors],  # 1-based, as messages
            )
        store = ResultsStore(results_path(out_dir, c.rank, c.world_size))
        done = store.finished(retry_errors=c.retry_errors)
        chosen = select(job.samples, limit=c.limit, rank=c.rank, world_size=c.world_size)
        pending = [s for s in chosen if s.id not in done]
        return _State(
            job=job,
            spec=spec,
            out_dir=out_dir,
            store=store,
            pending=pending,
            skipped=len(chosen) - len(pending),
            resume_problems=resumed,
        )

    def _own_files(self, out_dir: Path) -> list[str]:
        """The files of `out_dir` this rank writes (recorded with their hashes in manifest.json when it finishes)."""
        c = self.config
        suffix = shard_suffix(c.rank, c.world_size)
        names = [results_path(out_dir, c.rank, c.world_size).name, settings_path(out_dir, c.rank, c.world_size).name]
        names.append(f"load_errors{suffix}.json")
        return names + (["summary.json"] if c.world_size == 1 else [])

    def _check_stored(self, job: Job, out_dir: Path) -> tuple[str, ...]:
        """Re-score the rows a resume keeps (evr1_eval.verify): a stored score that differs, another benchmark's
        rows, unknown ids, a results file changed since the run recorded it are named (and fail the run's exit)."""
        if not any(out_dir.glob(RESULTS_GLOB)):
            return ()
        samples = Annotations({s.id: s for s in job.samples}, None)
        found = verify_benchmark(out_dir, job.benchmark, annotations=samples, resume=True)
        for problem in found.problems[:SHOWN_PROBLEMS]:
            log.warning("%s (resume): %s", job.benchmark.name, problem)
        return found.problems

    # -- one sample ---------------------------------------------------------------------------------------------
    async def _one(self, st: _State, sample: Sample, pool: ThreadPoolExecutor, bar: Progress) -> None:
        bench = st.job.benchmark
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        tokens = 0
        sent: dict[str, Any] | None = None  # the prompt record, once a request is built
        try:
            shown = dataclasses.replace(sample, videos=()) if self.config.without_video else sample
            box = await loop.run_in_executor(pool, _boxed, self.media.load, shown, st.spec)
            media = box.pop()
        except Exception as exc:
            row = bench.error_row(sample, f"media: {_describe(exc)}")
        else:
            bar.cache_hits += media.cache_hits
            request = Request(
                id=sample.id,
                prompt=sample.prompt,
                videos=media.videos,
                images=media.images,
                system=self.config.system_prompt,
                inline_media=st.job.protocol.get("protocol") == "evr1",  # the question's media markers, as trained
            )
            sent = request.record(shown.videos, shown.images).to_dict()
            del media
            agent_record: dict[str, Any] | None = None
            try:
                if self.config.agent is not None and shown.videos:  # tools over the sample's first video
                    outcome = await asyncio.wait_for(
                        run_agent(self.backend, request, self.config.params, self.config.agent, shown.videos[0]),
                        self.config.request_timeout_s,
                    )
                    gen, agent_record = outcome.generation, outcome.record
                else:
                    gen = await asyncio.wait_for(
                        self.backend.generate(request, self.config.params), self.config.request_timeout_s
                    )
            except EngineDead:
                raise
            except asyncio.TimeoutError:
                row = bench.error_row(sample, f"engine: timed out after {self.config.request_timeout_s} s")
            except Exception as exc:
                row = bench.error_row(sample, f"engine: {_describe(exc)}")
            else:
                del request
                tokens = gen.completion_tokens
                try:
                    scored = apply_response_filter(gen.text, self.config.response_filter)
                    # without a judge, `score_with_judge` is `score`
                    row = await bench.score_with_judge(sample, scored, self.judge, reading=self.config.reading)
                    if scored != gen.text:
                        row = dataclasses.replace(row, response=gen.text)
                except Exception as exc:  # a scorer must never crash on adversarial output; record it if it does
                    row = dataclasses.replace(bench.error_row(sample, f"scoring: {_describe(exc)}"), response=gen.text)
                row = dataclasses.replace(row, prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens)
                if agent_record is not None:
                    row = dataclasses.replace(row, details={**row.details, "agent": agent_record})
        row = dataclasses.replace(
            row,
            latency_s=round(time.perf_counter() - t0, 4),
            prompt=sent,
        )
        st.store.append(row)
        st.ran += 1
        st.errors += row.error is not None
        bar.finished_one(tokens=tokens, error=row.error is not None)

    # -- the loop -----------------------------------------------------------------------------------------------
    async def run(self, jobs: Sequence[Job]) -> list[JobResult]:
        states = [self._prepare(job) for job in jobs]
        total = sum(len(st.pending) for st in states)
        names = "+".join(s.job.benchmark.name for s in states)
        bar = Progress(
            total, enabled=self.config.progress, desc=names if len(names) <= 40 else f"{len(states)} benchmarks"
        )
        slots = asyncio.Semaphore(self.config.max_in_flight)
        tasks: set[asyncio.Task[None]] = set()
        failure: list[BaseException] = []

        def finished(task: asyncio.Task[None]) -> None:
            tasks.discard(task)
            slots.release()
            error = None if task.cancelled() else task.exception()
            if error is not None:
                failure.append(error)

        pool = ThreadPoolExecutor(max_workers=self.config.media_workers, thread_name_prefix="evr1-media")
        try:
            for st in states:
                st.store.open()
            for st, sample in ((state, sample) for state in states for sample in state.pending):
                await slots.acquire()  # the bound: a slot is taken before the sample's frames are loaded
                if failure:
                    slots.release()
                    break
                bar.started_one()
                task = asyncio.create_task(self._one(st, sample, pool, bar))
                tasks.add(task)
                task.add_done_callback(finished)
            if tasks:
                await asyncio.gather(*list(tasks), return_exceptions=True)
        finally:
            for task in list(tasks):
                task.cancel()
            if tasks:
                await asyncio.gather(*list(tasks), return_exceptions=True)
            pool.shutdown(wait=True, cancel_futures=True)
            for st in states:
                st.store.close()
            bar.close()
        if failure:
            raise failure[0]
        log.info("evaluated %d samples in %.1f s (%s)", bar.done, bar.elapsed, bar.stats())
        return [self._finish(st) for st in states]

    def _finish(self, st: _State) -> JobResult:
        c = self.config
        summary: BenchmarkSummary | None = None
        if c.world_size == 1:
            rows = list(st.store.finished().values())
            try:
                summary = st.job.benchmark.aggregate(rows)
            except Exception as exc:  # results are safe on disk; `evr1-eval report` can aggregate again
                log.error("%s: aggregation failed (%s); rows are in %s", st.job.benchmark.name, exc, st.store.path)
            else:
                write_summary(st.out_dir / "summary.json", summary, {"rows": len(rows)})
        record_written(st.out_dir, self._own_files(st.out_dir))
        verification = None
        if c.world_size == 1:  # each rank's files are verified by `report` once all are written
            chosen = select(st.job.samples, limit=c.limit, rank=c.rank, world_size=c.world_size)
            samples = Annotations({s.id: s for s in st.job.samples}, frozenset(s.id for s in chosen))
            verification = verify_benchmark(st.out_dir, st.job.benchmark, annotations=samples)
        return JobResult(
            benchmark=st.job.benchmark.name,
            out_dir=st.out_dir,
            selected=len(st.pending) + st.skipped,
            skipped=st.skipped,
            ran=st.ran,
            errors=st.errors,
            summary=summary,
            verification=verification,
            resume_problems=st.resume_problems,
        )


async def run_async(
    backend: Backend,
    jobs: Sequence[Job],
    config: RunConfig,
    *,
    media: MediaSource | MediaLoader | None = None,
    judge: Judge | None = None,
    judge_settings: Mapping[str, Any] | None = None,
) -> list[JobResult]:
    """Start the backend, run every job, always close the backend (also on Ctrl-C)."""
    await backend.start()
    try:
        runner = Runner(backend, config, media=media, judge=judge, judge_settings=judge_settings)
        return await runner.run(jobs)
    finally:
        await backend.close()


def evaluate(backend: Backend, jobs: Sequence[Job], config: RunConfig, **kwargs: Any) -> list[JobResult]:
    """Synchronous entry point (CLI, scripts): `asyncio.run(run_async(...))`."""
    return asyncio.run(run_async(backend, jobs, config, **kwargs))
