"""The runner's promises, checked with the fake backend: resume, error rows, bounded in-flight work, shards."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evr1_cache import SamplingSpec
from evr1_eval.api.base import make_error_row
from evr1_eval.backends import BackendConfig, EngineDead, GenerationParams, ImageInput, VideoInput, create_backend
from evr1_eval.backends.fake import FakeBackend
from evr1_eval.results import SettingsMismatch, iter_rows, load_rows, results_path
from evr1_eval.runner import Job, Media, RunConfig, evaluate, select
from evr1_eval.types import OFFICIAL_READING, BenchmarkSummary, Judge, Reading, Reference, Sample, ScoredSample

#: The tiny benchmark's frame settings (a real spec: the runner records its key and settings).
SPEC = SamplingSpec(fps=2.0, max_frames=8)


@dataclass(frozen=True)
class TinyBench:
    """A minimal benchmark: multiple choice, exact letter match, micro accuracy."""

    name: str = "tiny"
    prompt_version: str = "t1"
    spec: SamplingSpec = SPEC
    reference: Reference | None = None
    judge_optional_types: frozenset[str] = frozenset()

    @property
    def sampling(self) -> SamplingSpec:
        return self.spec

    async def score_with_judge(
        self, sample: Sample, response: str, judge: Judge | None, *, reading: Reading = OFFICIAL_READING
    ) -> ScoredSample:
        return self.score(sample, response, reading=reading)

    def error_row(self, sample: Sample, error: str) -> ScoredSample:
        return make_error_row(self.name, sample, error)

    def score(self, sample: Sample, response: str | None, *, reading: Reading = OFFICIAL_READING) -> ScoredSample:
        response = response or ""
        if "BOOM" in response:
            raise RuntimeError("scorer crashed")
        extracted = response.strip()[:1].upper() or None
        return ScoredSample(
            id=sample.id,
            benchmark=self.name,
            problem_type=sample.problem_type,
            response=response,
            extracted=extracted,
            score=float(extracted == sample.ground_truth),
            groups=dict(sample.groups),
        )

    def aggregate(self, rows: Sequence[ScoredSample]) -> BenchmarkSummary:
        n = len(rows)
        acc = 100.0 * sum(r.score for r in rows) / n if n else 0.0
        return BenchmarkSummary(
            benchmark=self.name,
            primary="accuracy",
            metrics={"accuracy": acc},
            counts={"total": n, "errors": sum(r.error is not None for r in rows)},
        )


class SyntheticMedia:
    """Frames made from the path name; "missing" paths raise like a missing file. Tracks live frame arrays."""

    def __init__(self) -> None:
        self.live = 0
        self.peak_live = 0
        self.lock = threading.Lock()
        self.specs: list[object] = []

    def _gone(self) -> None:
        with self.lock:
            self.live -= 1

    def load(self, sample: Sample, spec: object) -> Media:
        self.specs.append(spec)
        videos = []
        for path in sample.videos:
            if "missing" in path:
                raise FileNotFoundError(f"{path}: no such file")
            frames = np.full((4, 8, 8, 3), len(path) % 256, dtype=np.uint8)
            with self.lock:
                self.live += 1
                self.peak_live = max(self.peak_live, self.live)
            weakref.finalize(frames, self._gone)
            meta = {"fps": 30.0, "frames_indices": [0, 15, 30, 45], "total_num_frames": 60}
            videos.append(VideoInput(frames=frames, metadata=meta, key=path))
        images = tuple(ImageInput(pixels=np.zeros((8, 8, 3), np.uint8)) for _ in sample.images)
        return Media(videos=tuple(videos), images=images, cache_hits=0)


def samples(n: int, bench: str = "tiny", missing: Sequence[int] = ()) -> list[Sample]:
    return [
        Sample(
            id=f"q{i}",
            benchmark=bench,
            prompt=f"Question {i}? Answer with a letter.",
            ground_truth="AB"[i % 2],
            problem_type="multiple_choice",
            videos=(f"{'missing' if i in missing else 'v'}{i}.mp4",),
            groups={"task": f"t{i % 3}"},
        )
        for i in range(n)
    ]


def fake(**opts: object) -> FakeBackend:
    return FakeBackend(BackendConfig(model="fake-model", engine_kwargs=opts))


def run(tmp: Path, backend: FakeBackend, jobs: list[Job], media: SyntheticMedia | None = None, **cfg: object):
    config = RunConfig(out_dir=tmp, progress=False, **cfg)  # type: ignore[arg-type]
    return evaluate(backend, jobs, config, media=media or SyntheticMedia())


def rows_of(tmp: Path, bench: str = "tiny") -> list[dict]:
    path = tmp / bench / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_scores_every_sample_and_records_settings(tmp_path: Path) -> None:
    backend = fake(response="A")
    (res,) = run(tmp_path, backend, [Job(TinyBench(), samples(6), source="sha:abc")])
    rows = rows_of(tmp_path)
    assert sorted(r["id"] for r in rows) == [f"q{i}" for i in range(6)]
    assert [r["score"] for r in sorted(rows, key=lambda r: r["id"])] == [1.0, 0.0] * 3
    assert all(r["latency_s"] is not None and r["prompt"]["hash"] for r in rows)
    assert res.ran == 6
    assert res.errors == 0
    assert res.skipped == 0
    summary = json.loads((tmp_path / "tiny" / "summary.json").read_text())
    assert summary["metrics"]["accuracy"] == pytest.approx(50.0)
    settings = json.loads((tmp_path / "tiny" / "run.json").read_text())["fingerprint"]
    assert settings["generation"]["temperature"] == 0.0  # greedy by default
    assert settings["backend"]["model"] == "fake-model"
    assert settings["annotations"] == "sha:abc"
    assert settings["sampling"]["fps"] == 2.0
    assert backend.closed  # the runner always closes the backend
    # the request carried the sample's prompt and the loaded frames + metadata
    req = backend.seen[0]
    assert req.prompt.startswith("Question")
    assert req.video_metadata[0]["fps"] == 30.0
    assert req.video_shapes == ((4, 8, 8, 3),)


def test_resume_skips_finished_ids_without_prefix_assumption(tmp_path: Path) -> None:
    path = results_path(tmp_path / "tiny")
    path.parent.mkdir(parents=True)
    done = [
        ScoredSample(id=i, benchmark="tiny", problem_type="mc", response="A", extracted="A", score=1.0)
        for i in ("q4", "q1")
    ]
    from evr1_eval.results import ResultsStore

    store = ResultsStore(path)
    for r in done:
        store.append(r)
    store.close()
    backend = fake()
    (res,) = run(tmp_path, backend, [Job(TinyBench(), samples(6))])
    assert sorted(r.id for r in backend.seen) == ["q0", "q2", "q3", "q5"]
    assert res.skipped == 2
    assert res.ran == 4
    ids = [r["id"] for r in rows_of(tmp_path)]
    assert sorted(ids) == [f"q{i}" for i in range(6)]
    assert len(ids) == len(set(ids))
    # a second resume does nothing
    backend2 = fake()
    (res2,) = run(tmp_path, backend2, [Job(TinyBench(), samples(6))])
    assert backend2.seen == []
    assert res2.skipped == 6


def test_torn_last_line_is_tolerated_and_repaired(tmp_path: Path) -> None:
    run(tmp_path, fake(), [Job(TinyBench(), samples(6))], limit=3)
    path = tmp_path / "tiny" / "results.jsonl"
    with open(path, "a") as fh:
        fh.write('{"schema": 1, "id": "q3", "bench')  # the process died mid-write
    backend = fake()
    run(tmp_path, backend, [Job(TinyBench(), samples(6))])
    assert sorted(r.id for r in backend.seen) == ["q3", "q4", "q5"]
    lines = path.read_text().splitlines()
    assert len(lines) == 6
    assert all(json.loads(line)["id"] for line in lines)


def test_corrupt_row_in_the_middle_is_reported_with_its_line(tmp_path: Path) -> None:
    run(tmp_path, fake(), [Job(TinyBench(), samples(3))])
    path = tmp_path / "tiny" / "results.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n{garbage\n" + lines[1] + "\n")
    with pytest.raises(ValueError, match=r"results.jsonl:2: corrupt"):
        run(tmp_path, fake(), [Job(TinyBench(), samples(3))])


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"params": GenerationParams(max_tokens=7)}, "generation"),
        ({"sampling_overrides": {"fps": 1.0}}, "sampling"),
        ({"system_prompt": "Be terse."}, "system_prompt"),
        ({"reading": Reading(answer_tags="read")}, "answer_tags"),
        ({"reading": Reading(reasoning_tags="keep")}, "reasoning_tags"),
        ({"reading": Reading(reasoning_tags="strip")}, "reasoning_tags"),
    ],
)
def test_resume_refuses_mismatched_settings(tmp_path: Path, change: dict, key: str) -> None:
    run(tmp_path, fake(), [Job(TinyBench(), samples(4))], limit=2)
    with pytest.raises(SettingsMismatch, match=key) as err:
        run(tmp_path, fake(), [Job(TinyBench(), samples(4))], **change)
    assert "new --out" in str(err.value)
    assert len(rows_of(tmp_path)) == 2  # nothing was mixed in


@pytest.mark.parametrize(
    "reading", [Reading(answer_tags="read"), Reading(reasoning_tags="keep"), Reading("read", "strip")], ids=str
)
def test_a_reading_is_recorded_and_a_resume_read_another_way_is_refused(tmp_path: Path, reading: Reading) -> None:
    """Rows read one way (`<answer>` tags, reasoning blocks) never mix with rows read another (either direction); the
    fingerprint holds the non-default fields only (a run from before a field existed resumes), the manifest both."""
    run(tmp_path / "a", fake(), [Job(TinyBench(), samples(4))], limit=2, reading=reading)
    fingerprint = json.loads((tmp_path / "a" / "tiny" / "run.json").read_text())["fingerprint"]
    assert {k: fingerprint[k] for k in ("answer_tags", "reasoning_tags") if k in fingerprint} == reading.fingerprint()
    assert reading.fingerprint()  # each case departs from the default somewhere
    record = json.loads((tmp_path / "a" / "tiny" / "manifest.json").read_text())
    assert {k: record[k] for k in ("answer_tags", "reasoning_tags")} == reading.record()
    with pytest.raises(SettingsMismatch, match="|".join(reading.fingerprint())):
        run(tmp_path / "a", fake(), [Job(TinyBench(), samples(4))])  # the default reading
    assert len(rows_of(tmp_path / "a")) == 2
    run(tmp_path / "b", fake(), [Job(TinyBench(), samples(4))], limit=2)
    default_fp = json.loads((tmp_path / "b" / "tiny" / "run.json").read_text())["fingerprint"]
    assert "answer_tags" not in default_fp
    assert "reasoning_tags" not in default_fp
    with pytest.raises(SettingsMismatch, match="|".join(reading.fingerprint())):
        run(tmp_path / "b", fake(), [Job(TinyBench(), samples(4))], reading=reading)
    assert len(rows_of(tmp_path / "b")) == 2
    run(tmp_path / "a", fake(), [Job(TinyBench(), samples(4))], reading=reading)  # the same reading resumes
    assert len(rows_of(tmp_path / "a")) == 4


def test_a_reading_refuses_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown answer_tags 'first'; choose one of official, read"):
        Reading(answer_tags="first")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown reasoning_tags 'drop'; choose one of official, strip, keep"):
        Reading(reasoning_tags="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown reasoning_tags 'drop'"):
        Reading.from_record({"reasoning_tags": "drop"})
    assert Reading.from_record({}) == Reading.from_record({"answer_tags": None}) == OFFICIAL_READING
    assert Reading.from_record({"answer_tags": "read", "reasoning_tags": "keep"}) == Reading("read", "keep")


def test_resume_refuses_another_model_or_prompt_version(tmp_path: Path) -> None:
    run(tmp_path, fake(), [Job(TinyBench(), samples(2))])
    other = FakeBackend(BackendConfig(model="other-model"))
    with pytest.raises(SettingsMismatch, match="backend"):
        run(tmp_path, other, [Job(TinyBench(), samples(2))])
    with pytest.raises(SettingsMismatch, match="prompt_version"):
        run(tmp_path, fake(), [Job(TinyBench(prompt_version="t2"), samples(2))])


def test_failures_become_error_rows_and_the_run_finishes(tmp_path: Path) -> None:
    backend = fake(responses={"q2": "BOOM"}, fail_ids=["q1"])
    (res,) = run(tmp_path, backend, [Job(TinyBench(), samples(5, missing=[3]))])
    rows = {r["id"]: r for r in rows_of(tmp_path)}
    assert len(rows) == 5
    assert res.errors == 3
    assert rows["q1"]["error"].startswith("engine: BackendError")
    assert "q1" in rows["q1"]["error"]
    assert rows["q2"]["error"].startswith("scoring: RuntimeError")
    assert rows["q2"]["response"] == "BOOM"
    assert rows["q3"]["error"].startswith("media: FileNotFoundError")
    assert "missing3.mp4" in rows["q3"]["error"]
    assert all(rows[i]["score"] == 0.0 for i in ("q1", "q2", "q3"))
    assert rows["q0"]["error"] is None
    assert rows["q0"]["score"] == 1.0
    summary = json.loads((tmp_path / "tiny" / "summary.json").read_text())
    assert summary["counts"] == {"total": 5, "errors": 3}
    # error rows count as finished; --retry-errors runs exactly those again
    backend2 = fake()
    (res2,) = run(tmp_path, backend2, [Job(TinyBench(), samples(5))], retry_errors=True)
    assert sorted(r.id for r in backend2.seen) == ["q1", "q2", "q3"]
    assert res2.errors == 0
    assert {r.id: r.error for r in load_rows(tmp_path / "tiny")} == {f"q{i}": None for i in range(5)}


def test_timeout_is_an_error_row(tmp_path: Path) -> None:
    (res,) = run(tmp_path, fake(delay_s=1.0), [Job(TinyBench(), samples(2))], request_timeout_s=0.05)
    assert res.errors == 2
    assert all("timed out" in r["error"] for r in rows_of(tmp_path))


def test_dead_engine_stops_the_run_and_keeps_finished_rows(tmp_path: Path) -> None:
    class Dying(FakeBackend):
        async def generate(self, request, params):  # type: ignore[override]
            if request.id == "q5":
                raise EngineDead("engine core died")
            return await super().generate(request, params)

    backend = Dying(BackendConfig(model="fake-model"))
    with pytest.raises(EngineDead):
        run(tmp_path, backend, [Job(TinyBench(), samples(12))], max_in_flight=2)
    written = {r["id"] for r in rows_of(tmp_path)}
    assert "q5" not in written
    assert {"q0", "q1", "q2", "q3"} <= written
    assert len(written) < 12
    backend2 = fake()
    run(tmp_path, backend2, [Job(TinyBench(), samples(12))])
    assert {r.id for r in backend2.seen} == {f"q{i}" for i in range(12)} - written
    assert len(rows_of(tmp_path)) == 12


@pytest.mark.parametrize("limit", [1, 3, 7])
def test_in_flight_work_and_live_frames_are_bounded(tmp_path: Path, limit: int) -> None:
    media = SyntheticMedia()
    backend = fake(delay_s=0.005)
    run(tmp_path, backend, [Job(TinyBench(), samples(60))], media=media, max_in_flight=limit, media_workers=4)
    assert backend.max_in_flight <= limit
    assert media.peak_live <= limit
    if limit > 1:
        assert backend.max_in_flight > 1  # requests really overlap
    assert len(rows_of(tmp_path)) == 60


def test_frames_are_freed_when_a_pool_thread_lags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool thread slow to drop its finished work item (under load it waits for the GIL) keeps that item's future,
    and so its result, alive: the runner must not leave a finished sample's frames in it past the sample's slot."""
    from concurrent.futures import thread

    original = thread._WorkItem.run

    def lagging(self: Any) -> None:
        original(self)
        time.sleep(0.05)  # the work item (future and result) outlives the sample on the event loop

    monkeypatch.setattr(thread._WorkItem, "run", lagging)
    media = SyntheticMedia()
    run(tmp_path, fake(delay_s=0.001), [Job(TinyBench(), samples(12))], media=media, max_in_flight=2, media_workers=4)
    assert len(rows_of(tmp_path)) == 12
    assert media.peak_live <= 2


def test_rank_split_is_disjoint_and_merges(tmp_path: Path) -> None:
    seen: list[str] = []
    for rank in range(3):
        backend = fake()
        (res,) = run(tmp_path, backend, [Job(TinyBench(), samples(10))], rank=rank, world_size=3)
        assert res.summary is None  # per-shard: `report` aggregates the merged rows
        seen += [r.id for r in backend.seen]
        assert (tmp_path / "tiny" / f"results.rank{rank}-of-3.jsonl").exists()
        assert (tmp_path / "tiny" / f"run.rank{rank}-of-3.json").exists()
    assert sorted(seen) == sorted(f"q{i}" for i in range(10))
    assert len(seen) == 10
    merged = load_rows(tmp_path / "tiny")
    assert sorted(r.id for r in merged) == sorted(f"q{i}" for i in range(10))
    assert not (tmp_path / "tiny" / "results.jsonl").exists()


def test_select_applies_limit_before_the_split() -> None:
    s = samples(10)
    parts = [select(s, limit=7, rank=r, world_size=2) for r in range(2)]
    assert [x.id for x in parts[0]] == ["q0", "q2", "q4", "q6"]
    assert [x.id for x in parts[1]] == ["q1", "q3", "q5"]
    with pytest.raises(ValueError, match="rank"):
        RunConfig(out_dir=Path("x"), rank=2, world_size=2)


def test_several_benchmarks_stream_together(tmp_path: Path) -> None:
    a, b = TinyBench(name="bench_a"), TinyBench(name="bench_b", spec=SamplingSpec(fps=1.0, max_frames=8))
    media = SyntheticMedia()
    res = run(tmp_path, fake(), [Job(a, samples(3, "bench_a")), Job(b, samples(4, "bench_b"))], media=media)
    assert [r.ran for r in res] == [3, 4]
    assert len(rows_of(tmp_path, "bench_a")) == 3
    assert len(rows_of(tmp_path, "bench_b")) == 4
    assert SamplingSpec(fps=1.0, max_frames=8) in media.specs
    assert SPEC in media.specs


def test_duplicate_sample_ids_are_refused(tmp_path: Path) -> None:
    s = samples(3)
    with pytest.raises(ValueError, match="duplicate sample ids"):
        run(tmp_path, fake(), [Job(TinyBench(), [*s, s[0]])])


def test_cancelled_run_leaves_a_resumable_file(tmp_path: Path) -> None:
    from evr1_eval.runner import run_async

    backend = fake(delay_s=0.02)
    config = RunConfig(out_dir=tmp_path, progress=False, max_in_flight=2)

    async def interrupted() -> None:
        task = asyncio.create_task(run_async(backend, [Job(TinyBench(), samples(40))], config, media=SyntheticMedia()))
        await asyncio.sleep(0.15)
        task.cancel()  # what Ctrl-C does to asyncio.run's main task
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    assert backend.closed
    partial = {r.id for r in iter_rows(tmp_path / "tiny" / "results.jsonl")}
    assert 0 < len(partial) < 40
    backend2 = fake()
    run(tmp_path, backend2, [Job(TinyBench(), samples(40))])
    assert {r.id for r in backend2.seen} == {f"q{i}" for i in range(40)} - partial
    assert len(rows_of(tmp_path)) == 40


def test_backend_registry_refuses_duplicates_and_suggests_names() -> None:
    from evr1_eval.backends import backend_names, register

    assert {"vllm", "hf", "openai", "fake"} <= set(backend_names())
    with pytest.raises(KeyError, match="did you mean 'vllm'"):
        create_backend("vlm", BackendConfig(model="m"))
    with pytest.raises(ValueError, match="already registered"):
        register("fake")(FakeBackend)


def test_generation_params_are_validated() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        GenerationParams(max_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        GenerationParams(temperature=-1)


def test_without_video_baseline_gives_video_mmmu_delta_knowledge(tmp_path: Path) -> None:
    """`--without-video` sends no frames (images stay), is recorded, never mixes into a normal run, and `report`
    pairs it with a normal run into Video-MMMU's Δknowledge on the Adaptation track."""
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.report import collect_run, delta_knowledge, write_report

    def row(i: int, gt: str, image: bool) -> dict:
        return {"problem_id": f"p{i}", "problem": "Which?", "options": ["A. x", "B. y", "C. z"],
                "solution": f"<answer>{gt}</answer>", "problem_type": "multiple choice", "path": f"v{i}.mp4",
                **({"image_path": f"i{i}.png"} if image else {})}  # fmt: skip

    ann = tmp_path / "videommmu.json"
    ann.write_text(json.dumps([row(i, "A", image=i < 4) for i in range(6)]))
    bench = get_benchmark("videommmu")
    job = Job(bench, bench.load(ann).samples, source="sha:v")
    # Adaptation rows p0..p3: 1 of 4 right without the video, 3 of 4 with it
    before = fake(response="B", responses={"p0": "A"})
    after = fake(response="A", responses={"p3": "B"})
    run(tmp_path / "base", before, [job], without_video=True)
    run(tmp_path / "rl", after, [job])
    assert all(s.video_shapes == () for s in before.seen)
    assert sorted(s.id for s in before.seen if s.image_shapes) == ["p0", "p1", "p2", "p3"]
    assert all(len(s.video_shapes) == 1 for s in after.seen)
    assert json.loads((tmp_path / "base" / "videommmu" / "run.json").read_text())["fingerprint"]["without_video"]
    assert "without_video" not in json.loads((tmp_path / "rl" / "videommmu" / "run.json").read_text())["fingerprint"]
    with pytest.raises(SettingsMismatch, match="without_video"):
        run(tmp_path / "base", fake(), [job])  # the baseline folder never takes rows with video

    runs = [collect_run(tmp_path / "base"), collect_run(tmp_path / "rl")]
    assert runs[0].summaries["videommmu"].metrics["track/Adaptation"] == 25.0
    delta = delta_knowledge(runs)
    assert delta is not None
    assert delta["baseline"] == "base"
    assert delta["runs"] == {"rl": pytest.approx((75.0 - 25.0) / (100.0 - 25.0) * 100.0)}
    write_report(runs, tmp_path / "report", chart="none")
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Video-MMMU Δknowledge" in md
    assert "| rl | +66.7 |" in md
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["videommmu_delta_knowledge"]["before"] == 25.0
    assert delta_knowledge(runs[1:]) is None  # no baseline, no Δknowledge
