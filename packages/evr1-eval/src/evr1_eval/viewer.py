"""Evaluation runs -> the evr1 viewer's records (`evr1-eval report --html OUT/`): one static site, runs side by side.

A run folder records what the model was sent and answered (`results*.jsonl`: each row's prompt record, text and
media in order with its hash) and under which settings (`run*.json`: the frame spec, the annotation file's digest,
the command line). The card shows the recorded prompt, never a rebuilt one, after checking its hash; ground truth and
media come from the benchmark's annotation file, loaded the way `run` loads it; the frames come from the frame
cache, looked up with the recorded spec, so the strip shows exactly the cached frames the model was given. Every
check that fails (the annotation file changed since the run, a record that no longer hashes to what was sent, a
video not in the cache) becomes a visible note or problem, never a crash. Needs the `viewer` extra of evr1-cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_eval.results import Sources, read_run_settings, recorded_sources
from evr1_eval.verify import Annotations

if TYPE_CHECKING:
    from evr1_cache.spec import SamplingSpec
    from evr1_cache.viewer import MediaRef, ResponseRecord, RunRecord, SampleRecord
    from evr1_eval.report import RunReport
    from evr1_eval.types import Sample, ScoredSample

#: Group names tried in order for the "task" shown and filtered on (benchmarks name their task field differently).
TASK_GROUPS = ("task", "task_type", "question_type", "category", "dimension", "subject", "domain")
#: A row counts as correct when its metric reaches this (1/0 metrics: 1; partial credit: at least half).
CORRECT_AT = 0.5
#: What a run's headline tile averages (the viewer's tables count verdicts instead, `score >= CORRECT_AT`).
METRIC_LABEL = "the benchmark's metric over per-sample scores (partial credit such as IoU counts as its value)"


def add_html_arguments(parser: argparse.ArgumentParser) -> None:
    """`report`'s viewer options (kept here so the report command needs one line for them)."""
    g = parser.add_argument_group("HTML viewer (needs `pip install 'evr1-cache[viewer]'`)")
    g.add_argument("--html", type=Path, default=None, metavar="DIR", help="also write the static sample viewer to DIR")
    g.add_argument(
        "--annotations-dir", type=Path, default=None, help="annotations of the runs (default: what each run recorded)"
    )
    g.add_argument("--media-root", type=Path, default=None, help="media root of the annotations (default: recorded)")
    g.add_argument("--cache-dir", type=Path, default=None, help="frame cache for the thumbnails (default: recorded)")


def run_html(args: argparse.Namespace, reports: Sequence[RunReport] | None = None) -> int:
    """Write the viewer for `args.runs` into `args.html`; prints the page to open. Returns the number of problems.
    `reports`: the runs' `collect_run` results when the caller has them (`report --html`), so no run is re-scored twice."""
    from evr1_cache.viewer import write_site

    given = Sources(args.annotations_dir, args.media_root, args.cache_dir)
    collected = list(reports) if reports is not None else [None] * len(args.runs)
    runs = [eval_run_record(Path(d), given, report=r) for d, r in zip(args.runs, collected, strict=True)]
    try:
        result = write_site(runs, args.html, title="evr1-eval report")
    except ImportError as exc:  # the viewer extra is missing: a clear CLI error, not a traceback
        raise ValueError(str(exc)) from exc
    problems = sum(len(r.problems) for r in runs)
    for run in runs:
        for problem in run.problems:
            print(f"viewer: {run.name}: {problem}", file=sys.stderr)
    print(
        f"viewer: {result.samples} samples, {result.thumbnails_written} thumbnail sets written, "
        f"{result.thumbnails_reused} reused; open {result.index.resolve()}",
        file=sys.stderr,
    )
    return problems


def eval_run_record(
    run_dir: Path, given: Sources | None = None, *, name: str | None = None, report: RunReport | None = None
) -> RunRecord:
    """One run folder (or one benchmark folder) as viewer records; never raises for what a run folder holds. `report`:
    the folder's `collect_run(run_dir, given)` when the caller already has it."""
    from evr1_cache.viewer import RunRecord
    from evr1_eval.report import bench_dirs, collect_run, primary_value
    from evr1_eval.results import load_rows

    given = given or Sources()
    run_dir = Path(run_dir)
    if report is None:  # its problems name annotations that did not load or changed since the run
        report = collect_run(run_dir, given)
    problems = list(report.problems)
    samples: list[SampleRecord] = []
    for bench_dir in bench_dirs(run_dir):  # a folder with only summary.json has no rows
        try:
            rows = load_rows(bench_dir)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if rows:
            samples += _bench_samples(bench_dir, rows, given, report.annotations.get(rows[0].benchmark), problems)
    summary: dict[str, float | int | str] = {}
    for bench, s in report.summaries.items():
        value = primary_value(s)
        summary[f"{bench} {s.primary}: {METRIC_LABEL}"] = "n/a" if value is None else round(value, 2)
    return RunRecord(
        name=name or report.name,
        kind="eval",
        samples=samples,
        summary=summary,
        problems=tuple(problems),
        source=str(run_dir),
    )


def _bench_samples(
    bench_dir: Path,
    rows: Sequence[ScoredSample],
    given: Sources,
    annotations: Annotations | str | None,
    problems: list[str],
) -> list[SampleRecord]:
    settings = read_run_settings(bench_dir, problems)
    fingerprint = settings.get("fingerprint") or {}
    bench_name = rows[0].benchmark
    by_id = dict(annotations.samples) if isinstance(annotations, Annotations) else {}
    spec = _spec(fingerprint, problems, bench_name)
    reader = _reader(given.cache_dir or recorded_sources(settings).cache_dir, problems)
    without_video = bool(fingerprint.get("without_video"))
    system = fingerprint.get("system_prompt")
    tools = _tool_streams(fingerprint.get("agent"), problems, bench_name)
    position = {sid: i for i, sid in enumerate(by_id)}  # annotation order (results are in completion order)
    out = []
    for row in sorted(rows, key=lambda r: position.get(r.id, len(position))):
        sample = by_id.get(row.id)
        record = _record(row, sample, spec, reader, without_video, system if isinstance(system, str) else None)
        if tools and sample is not None and sample.videos and reader is not None:
            returned = _tool_media((row.details or {}).get("agent"), sample.videos[0], tools, reader)
            record = dataclasses.replace(record, media=(*record.media, *returned))
        out.append(record)
    if by_id:
        missing = sum(1 for r in rows if r.id not in by_id)
        if missing:
            problems.append(f"{bench_name}: {missing} result rows have no sample in the annotations (ids changed?)")
    return out


def _spec(fingerprint: Mapping[str, Any], problems: list[str], bench: str) -> Any:
    record = fingerprint.get("sampling")
    if not isinstance(record, Mapping):
        return None
    from evr1_cache.spec import SamplingSpec

    fields = {k: v for k, v in record.items() if k != "key"}
    try:
        spec = SamplingSpec.from_dict(fields)
    except (TypeError, ValueError) as exc:
        problems.append(f"{bench}: recorded frame settings unreadable ({exc}); frames are not shown")
        return None
    if record.get("key") and record["key"] != spec.key():
        problems.append(f"{bench}: recorded frame settings do not hash to the recorded key; frames may differ")
    return spec


def _reader(cache_dir: Path | None, problems: list[str]) -> Any:
    if cache_dir is None:
        return None
    from evr1_cache import CacheReader

    try:
        return CacheReader(cache_dir)
    except FileNotFoundError as exc:
        problems.append(f"frame cache not found ({exc}); thumbnails are not shown")
        return None


def _tool_streams(agent: Any, problems: list[str], bench: str) -> dict[str, SamplingSpec]:
    """The cached streams a run's tools served from (`ToolConfig` as the run recorded it), by stream name."""
    if not isinstance(agent, Mapping) or not isinstance(agent.get("config"), Mapping):
        return {}
    from evr1_cache.tools import ToolConfig

    try:
        config = ToolConfig(**dict(agent["config"]))
    except (TypeError, ValueError) as exc:
        problems.append(f"{bench}: recorded tool settings unreadable ({exc}); the tools' frames are not shown")
        return {}
    return {"frames": config.frames_spec(), "detail": config.detail_spec()}


def _tool_media(agent: Any, video: str, streams: Mapping[str, SamplingSpec], reader: Any) -> tuple[MediaRef, ...]:
    """One strip per frame set a tool call returned, in turn order: those very frames of the stream it served from
    (a crop: its source frame), labelled with the call."""
    from evr1_cache.viewer import MediaRef

    refs: list[MediaRef] = []
    for n, turn in enumerate(_items(agent, "turns"), start=1):  # the record is data from a results file: checked
        for call in _items(turn, "calls"):
            for media in _items(call, "media"):
                spec = streams.get(str(media.get("stream")))
                if spec is None:
                    continue
                args = ", ".join(f"{k}={v}" for k, v in (call.get("arguments") or {}).items())
                what = "the source frame of its crop" if media.get("kind") == "image" else "these frames"
                try:
                    rel = str(reader.path_for(video, spec).relative_to(reader.root))
                except (OSError, ValueError):
                    continue
                refs.append(
                    MediaRef(
                        kind="video", source=video, cache_root=str(reader.root), cache_file=rel,
                        timestamps=tuple(float(t) for t in media.get("timestamps") or ()),
                        positions=tuple(int(p) for p in media.get("positions") or ()),
                        note=f"turn {n}: {call.get('name')}({args}) returned {what}",
                    )
                )  # fmt: skip
    return tuple(refs)


def _items(record: Any, key: str) -> list[Mapping[str, Any]]:
    """The mappings listed under `record[key]` (nothing when the record is not shaped so)."""
    value = record.get(key) if isinstance(record, Mapping) else None
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _media(sample: Sample, spec: Any, reader: Any, without_video: bool) -> tuple[MediaRef, ...]:
    from evr1_cache.viewer import MediaRef

    refs = [] if without_video else [_video_ref(video, spec, reader) for video in sample.videos]
    if sample.images and reader is not None:
        from evr1_eval.jobs import image_spec_for

        ispec = image_spec_for(spec)
        for image in sample.images:
            try:
                present = reader.contains(image, ispec)
            except OSError:
                present = False
            rel = str(reader.path_for(image, ispec).relative_to(reader.root)) if present else None
            refs.append(MediaRef(kind="image", source=image, cache_root=str(reader.root), cache_file=rel,
                                 note=None if present else "image not in the frame cache"))  # fmt: skip
    elif sample.images:
        refs += [MediaRef(kind="image", source=i, note="no frame cache given") for i in sample.images]
    return tuple(refs)


def _video_ref(video: str, spec: Any, reader: Any) -> MediaRef:
    from evr1_cache.viewer import MediaRef

    ref = functools.partial(MediaRef, kind="video", source=video)
    if spec is None:
        return ref(note="the run recorded no frame settings")
    if reader is None:
        return ref(note="no frame cache given (--cache-dir): timestamps unknown")
    try:
        _, meta = reader.load(video, spec, mmap=True)
        rel = str(reader.path_for(video, spec).relative_to(reader.root))
    except (KeyError, OSError, ValueError) as exc:
        return ref(note=f"not in the frame cache for the run's spec ({exc}); the run decoded it on the fly")
    frames, times = tuple(meta.frames_indices), tuple(meta.timestamps)
    return ref(cache_root=str(reader.root), cache_file=rel, frame_indices=frames, timestamps=times)


def _task(groups: Mapping[str, str]) -> str:
    named = [str(groups[key]) for key in TASK_GROUPS if groups.get(key)]
    return named[0] if named else str(next(iter(groups.values()), ""))


def _scores(row: ScoredSample) -> dict[str, float]:
    scores = {"score": float(row.score)}
    for key, value in (row.details or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value)):
            scores[str(key)] = float(value)
    return scores


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _record(
    row: ScoredSample, sample: Sample | None, spec: Any, reader: Any, without_video: bool, system: str | None
) -> SampleRecord:
    from evr1_cache.viewer import ResponseRecord, SampleRecord, shown_prompt

    shown = shown_prompt(row.prompt, sample.prompt if sample is not None else "", system,
                         instead="the prompt rebuilt from today's annotations" if sample else "nothing")  # fmt: skip
    notes = list(shown.pop("notes", ()))
    if without_video:
        notes.append("run without video (--without-video): the model saw no frames")
    unscored = row.needs_judge or row.error is not None
    details = {"finish": "needs LLM judge"} if row.needs_judge else {}
    for key, value in (row.details or {}).items():  # the scorer's own short facts (scorer name, answered, reason)
        if isinstance(value, (str, bool)) and len(str(value)) <= 80:
            details[str(key)] = str(value).lower() if isinstance(value, bool) else value
    if row.latency_s is not None:
        details["latency"] = f"{row.latency_s:.2f} s"
    agent = (row.details or {}).get("agent")
    text = row.response
    if isinstance(agent, Mapping):  # a run with --tools: every turn, its calls and the frames they returned
        from evr1_cache.tools import episode_transcript

        text = episode_transcript(agent)
    response: ResponseRecord = ResponseRecord(
        text=text,
        extracted=row.extracted,
        scores={} if row.error is not None else _scores(row),
        correct=None if unscored else row.score >= CORRECT_AT,
        error=row.error,
        tokens=row.completion_tokens or None,
        details=details,
    )
    media = _media(sample, spec, reader, without_video) if sample is not None else ()
    return SampleRecord(
        key=f"{row.benchmark}/{row.id}",
        label=row.id,
        benchmark=row.benchmark,
        task=_task(row.groups or {}),
        problem_type=row.problem_type,
        **shown,
        ground_truth=_text(sample.ground_truth) if sample is not None else "",
        media=media,
        responses=(response,),
        notes=tuple(notes),
    )
