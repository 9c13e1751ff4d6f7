"""`build_cache`: cache every video and image of every row of a dataset file, resumably, shardable without coordination.

Flow, one function per step: `plan_jobs` reads the rows (`evr1_cache.dataset`: one malformed line is one row error)
and resolves every media path (`evr1_cache.paths.MediaPaths`: relative to the data file or `media_root`, and confined
to that folder unless `allow_outside_media`) into one `EntryJob` per distinct content (a video used by many rows is decoded once) ->
`shard` keeps the jobs of this `rank` (hash of the entry key modulo `world_size`: any launcher, no coordination) ->
`select` skips entries already built, after checking each one's header and size (a damaged entry is rebuilt) ->
`execute` builds the rest (`workers` processes; each `EntryResult` is appended to this rank's index JSONL) ->
`finalize` writes the error report and the output dataset (rows + a cache reference + the `VideoMeta` of each media).
No bad media file or row stops a build; the `BuildReport` counts them and `ok` is False when any failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Literal

from evr1_cache.atomic import atomic_open, is_temp
from evr1_cache.dataset import Row, read_dataset
from evr1_cache.errors import CorruptEntry, MediaError
from evr1_cache.paths import MediaPaths
from evr1_cache.sources import media_file, source_identity
from evr1_cache.spec import ImageSpec, SamplingSpec
from evr1_cache.store import entry_key, entry_relpath, frames_layout, read_header, remove_entry

VIDEO_KEYS = ("videos", "video")
IMAGE_KEYS = ("images", "image")
Kind = Literal["video", "image"]
_KINDS: tuple[tuple[Kind, tuple[str, ...]], ...] = (("video", VIDEO_KEYS), ("image", IMAGE_KEYS))


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What one `build_cache` call did. `ok` is False when any media or row failed (see `errors`)."""

    rows: int  #: rows read (malformed lines are in `bad_rows`, not here)
    videos: int  #: distinct video entries this rank is responsible for
    images: int
    built: int
    skipped: int  #: already finished (resume)
    failed: int  #: media of this rank that could not be cached
    errors: tuple[str, ...]  #: one line per failure: "file:line: reason" for rows, "file: reason (fix: ...)" for media
    bytes_written: int
    seconds: float
    output_data: Path | None
    index_file: Path
    error_file: Path | None
    notes: tuple[str, ...] = field(default=())
    bad_rows: int = 0  #: dataset lines that are not JSON objects
    rebuilt: int = 0  #: damaged entries found by the resume check and built again
    vfr_videos: int = 0  #: variable-frame-rate videos among those built (the timeline decides their frames)
    timeline: str = "reference"  #: the video spec's timeline (evr1_cache.spec.TIMELINES)

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.bad_rows == 0


@dataclass(frozen=True, slots=True)
class EntryJob:
    """One entry to build: the media file (absolute path), what it is, its entry key and file (relative to the
    cache root), and the spec it is built under."""

    kind: Kind
    source: str
    key: str
    rel: str
    spec: SamplingSpec | ImageSpec


@dataclass(frozen=True, slots=True)
class EntryResult:
    """The outcome of one `EntryJob`: built (`bytes`, `shape`) or failed (`error`, one report line)."""

    job: EntryJob
    ok: bool
    bytes: int = 0
    shape: tuple[int, ...] = ()
    error: str | None = None
    vfr: bool = False  #: a variable-frame-rate video

    def record(self) -> dict[str, Any]:
        """The index-file line of this outcome."""
        base = {"kind": self.job.kind, "source": self.job.source, "key": self.job.key, "file": self.job.rel}
        if self.ok:
            return {**base, "status": "ok", "bytes": self.bytes, "shape": list(self.shape), "vfr": self.vfr}
        return {**base, "status": "error", "error": self.error}


@dataclass(frozen=True)
class Plan:
    """What a dataset asks for: the rows, each row's resolved media, the distinct jobs, and media that failed
    before any decoding (missing, not a regular file, escaping the media root)."""

    data_file: Path
    rows: tuple[Row, ...]
    row_errors: tuple[str, ...]
    row_media: tuple[dict[Kind, tuple[str, ...]], ...]
    jobs: dict[str, EntryJob]
    key_of: dict[tuple[Kind, str], str]
    media_errors: dict[str, str]


def _items(value: Any) -> list[Any]:
    """A media column's entries: a single path or `{"video": path, ...}` entry, or a list of them."""
    return [value] if isinstance(value, (str, dict)) else value if isinstance(value, list) else []


def _name(item: Any) -> Any:
    """The path an entry names (`{"video": path, ...}` style entries hold it under one of three keys)."""
    return item.get("video") or item.get("image") or item.get("path") if isinstance(item, dict) else item


def media_of(row: dict[str, Any], keys: Sequence[str]) -> list[str]:
    """The media paths of a row under EasyVideoR1's schema (`videos`/`images` lists, or a single `video`/`image`)."""
    names = (_name(item) for key in keys for item in _items(row.get(key)))
    return [name for name in names if isinstance(name, str) and name]


def owner(key: str, world_size: int) -> int:
    """The rank that builds `key`: stable across machines and runs, needs no coordination."""
    return int(key[:8], 16) % world_size


def plan_jobs(
    data_file: str | os.PathLike[str],
    spec: SamplingSpec,
    image_spec: ImageSpec,
    *,
    media_root: str | os.PathLike[str] | None = None,
    allow_outside_media: bool = False,
    allow_remote_media: Iterable[str] = (),
) -> Plan:
    """Read the dataset and turn its media into jobs (content-addressed: two paths with the same bytes share one);
    media paths are resolved and confined by `MediaPaths` (a refused path is a failed row naming its line)."""
    data_path = Path(data_file)
    paths_rule = MediaPaths.for_dataset(
        data_path, media_root, allow_outside=allow_outside_media, allow_remote=allow_remote_media
    )
    dataset = read_dataset(data_path)
    errors: dict[str, str] = {}
    jobs: dict[str, EntryJob] = {}
    key_of: dict[tuple[Kind, str], str] = {}
    row_media: list[dict[Kind, tuple[str, ...]]] = []
    specs: dict[Kind, SamplingSpec | ImageSpec] = {"video": spec, "image": image_spec}
    for row in dataset.rows:
        refs: dict[Kind, tuple[str, ...]] = {}
        for kind, keys in _KINDS:
            sp = specs[kind]
            paths: list[str] = []
            for media in media_of(row.data, keys):
                try:
                    path = paths_rule.resolve(media, f"{data_path.name} line {row.line}")
                except MediaError as exc:
                    path = exc.path
                    errors.setdefault(path, str(exc))
                paths.append(path)
                if (kind, path) in key_of or path in errors:
                    continue
                try:
                    media_file(path)
                    key = entry_key(source_identity(path), sp)
                except MediaError as exc:
                    errors[path] = str(exc)
                    continue
                key_of[(kind, path)] = key
                jobs.setdefault(key, EntryJob(kind, path, key, entry_relpath(sp, key), sp))
            refs[kind] = tuple(paths)
        row_media.append(refs)
    return Plan(data_path, dataset.rows, tuple(map(str, dataset.errors)), tuple(row_media), jobs, key_of, errors)


def rows_using(plan: Plan) -> dict[str, list[int]]:
    """Each media path -> the 1-based lines of the rows that use it (a failed media file is reported with them)."""
    users: dict[str, list[int]] = {}
    for row, refs in zip(plan.rows, plan.row_media, strict=True):
        for paths in refs.values():
            for path in dict.fromkeys(paths):
                users.setdefault(path, []).append(row.line)
    return users


def _used_by(plan: Plan, lines: Sequence[int], shown: int = 5) -> str:
    if not lines:
        return ""
    more = f" and {len(lines) - shown} more" if len(lines) > shown else ""
    return f" (used by {plan.data_file.name} line {', '.join(map(str, lines[:shown]))}{more})"


def shard(plan: Plan, rank: int, world_size: int) -> tuple[list[EntryJob], dict[str, str]]:
    """This rank's jobs, and this rank's share of the media that failed before decoding (by path hash)."""
    mine = [job for job in plan.jobs.values() if owner(job.key, world_size) == rank]
    errors = {p: e for p, e in plan.media_errors.items() if owner(_path_hash(p), world_size) == rank}
    return mine, errors


def select(jobs: list[EntryJob], out: Path) -> tuple[list[EntryJob], int, int]:
    """(jobs to build, finished entries skipped, damaged entries removed to be rebuilt). A finished entry is one
    whose header parses and whose size matches it; anything else at the entry's path is removed and rebuilt."""
    _remove_stale_temps(out, jobs)
    todo: list[EntryJob] = []
    skipped = rebuilt = 0
    for job in jobs:
        path = out / job.rel
        if not os.path.lexists(path):
            todo.append(job)
            continue
        try:
            header, start = read_header(path)
            frames_layout(header, start, path.stat().st_size, path)
            skipped += 1
            continue
        except (CorruptEntry, OSError):
            remove_entry(path)
        rebuilt += 1
        todo.append(job)
    return todo, skipped, rebuilt


def build_entry(job: EntryJob, out: str, decoder: str, threads: int) -> EntryResult:
    """Build one entry (runs in a worker process): an EntryResult, never an exception for bad media."""
    from evr1_cache.probing import probe
    from evr1_cache.writer import make_entry

    try:
        info = probe(media_file(job.source)) if job.kind == "video" else None  # a regular file before any decoder
        size, shape = make_entry(job.source, job.spec, Path(out, job.rel), decoder=decoder, threads=threads, info=info)
        return EntryResult(job, True, size, shape, vfr=info is not None and info.vfr)
    except MediaError as exc:
        return EntryResult(job, False, error=str(exc))
    except Exception as exc:
        return EntryResult(job, False, error=f"{job.source}: {type(exc).__name__}: {exc}")


def execute(todo: list[EntryJob], out: Path, decoder: str, workers: int, threads: int) -> Iterator[EntryResult]:
    """Build `todo` (in `workers` processes when > 1), yielding each result as it completes."""
    if workers == 1 or len(todo) <= 1:
        for job in todo:
            yield build_entry(job, str(out), decoder, threads)
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=_worker_context()) as pool:
        queue = iter(todo)
        pending = {pool.submit(build_entry, job, str(out), decoder, threads): job for job in islice(queue, 2 * workers)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                job = pending.pop(fut)
                try:
                    result = fut.result()
                except Exception as exc:
                    result = EntryResult(job, False, error=f"{job.source}: worker failed ({type(exc).__name__}: {exc})")
                yield result
                nxt = next(queue, None)
                if nxt is not None:
                    pending[pool.submit(build_entry, nxt, str(out), decoder, threads)] = nxt


def build_cache_from_args(
    args: argparse.Namespace,
    data_file: str | os.PathLike[str],
    spec: SamplingSpec,
    image_spec: ImageSpec,
    *,
    media_root: str | os.PathLike[str] | None,
    output_data: str | os.PathLike[str] | None,
) -> BuildReport:
    """`build_cache` into `args.out` with the `evr1-cache build` flags of `args` (a plain build, each `--plan` part)."""
    flags = ("allow_outside_media", "allow_remote_media", "decoder", "workers", "rank", "world_size", "threads")
    return build_cache(
        data_file,
        args.out,
        spec,
        image_spec,
        media_root=media_root,
        output_data=output_data,
        progress=not args.no_progress,
        **{name: getattr(args, name) for name in flags},
    )


def build_cache(
    data_file: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    spec: SamplingSpec,
    image_spec: ImageSpec,
    *,
    media_root: str | os.PathLike[str] | None = None,
    allow_outside_media: bool = False,
    allow_remote_media: Iterable[str] = (),
    decoder: str = "auto",
    workers: int = 1,
    rank: int = 0,
    world_size: int = 1,
    progress: bool = True,
    output_data: str | os.PathLike[str] | None = None,
    threads: int | None = None,
) -> BuildReport:
    """Cache all media of `data_file` into `out_dir` (see module docstring). Never raises for a bad media file or
    row; raises DatasetError when the dataset file itself cannot be read and ValueError for bad arguments."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank} world_size={world_size}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    t0 = time.perf_counter()
    out = Path(out_dir)
    plan = plan_jobs(
        data_file,
        spec,
        image_spec,
        media_root=media_root,
        allow_outside_media=allow_outside_media,
        allow_remote_media=allow_remote_media,
    )
    out.mkdir(parents=True, exist_ok=True)
    mine, errors = shard(plan, rank, world_size)
    todo, skipped, rebuilt = select(mine, out)
    index_file = out / "index" / f"rank-{rank:05d}-of-{world_size:05d}.jsonl"
    index_file.parent.mkdir(parents=True, exist_ok=True)
    if threads is None:  # one worker: let the decoder use every core; several: split the cores between them
        threads = 0 if workers == 1 else max(1, (os.cpu_count() or 1) // workers)
    built = written = vfr = 0
    from tqdm import tqdm

    bar = tqdm(total=len(todo), desc="evr1-cache build", unit="media", disable=not progress, dynamic_ncols=True)
    with open(index_file, "a", encoding="utf-8") as index, bar:
        for path, err in errors.items():
            index.write(json.dumps({"kind": "media", "source": path, "status": "error", "error": err}) + "\n")
        for result in execute(todo, out, decoder, workers, threads):
            index.write(json.dumps(result.record(), ensure_ascii=False) + "\n")
            index.flush()
            if result.ok:
                built += 1
                written += result.bytes
                vfr += result.vfr
            else:
                errors[result.job.source] = str(result.error)
            bar.update(1)
            bar.set_postfix(failed=len(errors), refresh=False)
    notes = [f"{rebuilt} damaged entries were removed and rebuilt"] if rebuilt else []
    out_data = finalize(plan, out, errors, rank, world_size, output_data, notes)
    users = rows_using(plan)
    error_lines = (*plan.row_errors, *(f"{errors[p]}{_used_by(plan, users.get(p, []))}" for p in sorted(errors)))
    error_file = out / f"errors.rank-{rank:05d}-of-{world_size:05d}.txt"
    with atomic_open(error_file, "w") as fh:
        fh.write("".join(line + "\n" for line in error_lines))
    videos = sum(1 for j in mine if j.kind == "video")
    return BuildReport(
        rows=len(plan.rows),
        videos=videos,
        images=len(mine) - videos,
        built=built,
        skipped=skipped,
        failed=len(errors),
        errors=error_lines,
        bytes_written=written,
        seconds=time.perf_counter() - t0,
        output_data=out_data,
        index_file=index_file,
        error_file=error_file if error_lines else None,
        notes=tuple(notes),
        bad_rows=len(plan.row_errors),
        rebuilt=rebuilt,
        vfr_videos=vfr,
        timeline=spec.timeline,
    )


def finalize(
    plan: Plan,
    out: Path,
    errors: dict[str, str],
    rank: int,
    world_size: int,
    output_data: str | os.PathLike[str] | None,
    notes: list[str],
) -> Path | None:
    """Write the output dataset (every rank's entries must exist: with several ranks, only once all finished).
    A media whose entry is unusable at this point (absent without an error, or damaged) is added to `errors`."""
    missing = [j for j in plan.jobs.values() if not (out / j.rel).is_file() and j.source not in errors]
    if world_size > 1 and missing:
        notes.append(
            f"output dataset not written: {len(missing)} entries belong to other ranks or are unfinished; after all "
            "ranks finish, run the same build once without --rank/--world-size (it only reads headers)"
        )
        return None
    target = Path(output_data) if output_data else out / f"{plan.data_file.stem}.evr1.jsonl"
    # rows + `video_cache` / `image_cache` (one reference per media, None where it failed) + `cache_errors`
    known = {**plan.media_errors, **errors}
    meta_memo: dict[str, Any] = {}

    def ref(kind: Kind, path: str) -> dict[str, Any] | None:
        key = plan.key_of.get((kind, path))
        if key is None:
            return None
        if key not in meta_memo:
            entry = out / plan.jobs[key].rel
            try:
                header, start = read_header(entry)
                frames_layout(header, start, entry.stat().st_size, entry)
                meta_memo[key] = json.loads(header["__metadata__"]["meta"])
            except (CorruptEntry, OSError, KeyError, ValueError) as exc:
                meta_memo[key] = None
                errors.setdefault(path, f"{path}: its cache entry is unusable ({exc}); re-run the build")
        if meta_memo[key] is None:
            return None
        return {"file": plan.jobs[key].rel, "key": key, "meta": meta_memo[key]}

    kinds = [kind for kind, _ in _KINDS]
    with atomic_open(target, "w") as fh:
        for row, media in zip(plan.rows, plan.row_media, strict=True):
            refs = {kind: [ref(kind, p) for p in media.get(kind, ())] for kind in kinds}
            failed = [
                known.get(p) or errors.get(p) or f"{p}: not cached"
                for kind in kinds
                for p, r in zip(media.get(kind, ()), refs[kind], strict=True)
                if r is None
            ]
            extra = {"video_cache": refs["video"], "image_cache": refs["image"], "cache_errors": failed}
            out_row = _rebase_media(row.data, media, target.parent)
            fh.write(json.dumps({**out_row, **extra}, ensure_ascii=False, default=str) + "\n")
    return target


def _rebase_media(row: dict[str, Any], media: dict[Kind, tuple[str, ...]], base: Path) -> dict[str, Any]:
    """The row with each media path rewritten relative to the output dataset's folder.

    The output file usually lives elsewhere than the input (in the cache folder), so paths relative to the input file
    or to `--media-root` would point nowhere from there; relative (not absolute) keeps a moved tree working.
    """
    resolved = {kind: iter(paths) for kind, paths in media.items()}
    out = dict(row)
    for kind, keys in _KINDS:
        for key in keys:
            value = row.get(key)
            if value is None:
                continue
            rebased: list[Any] = []
            for item in _items(value):
                name = _name(item)
                if not (isinstance(name, str) and name):
                    rebased.append(item)
                    continue
                resolved_path = next(resolved[kind])
                if not os.path.isabs(resolved_path):  # refused before it was resolved (keyed by its row): as written
                    rebased.append(item)
                    continue
                try:
                    new = os.path.relpath(resolved_path, base)
                except ValueError:  # another drive (Windows) or an unusable path: keep it as written
                    new = name
                if isinstance(item, dict):
                    key_name = next(k for k in ("video", "image", "path") if item.get(k) == name)
                    rebased.append({**item, key_name: new})
                else:
                    rebased.append(new)
            out[key] = rebased[0] if isinstance(value, (str, dict)) else rebased
    return out


def _worker_context() -> Any:
    """Workers never fork the caller (it may hold threads and locks: tqdm, pyarrow). A forkserver with the decoding
    stack preloaded starts each worker in milliseconds; where there is none (Windows), spawn."""
    import multiprocessing

    try:
        ctx = multiprocessing.get_context("forkserver")
    except ValueError:
        return multiprocessing.get_context("spawn")
    ctx.set_forkserver_preload(
        ["numpy", "av", "PIL.Image", "evr1_cache.writer", "evr1_cache.decode", "evr1_cache.image"]
    )
    return ctx


def _path_hash(path: str) -> str:
    return hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


def _remove_stale_temps(out: Path, mine: list[EntryJob]) -> None:
    """Temp files of this rank's keys can only be left over from a killed run (keys are sharded by rank)."""
    keys_by_folder: dict[Path, set[str]] = {}
    for job in mine:
        keys_by_folder.setdefault((out / job.rel).parent, set()).add(job.key)
    for folder, keys in keys_by_folder.items():
        if folder.is_dir():
            for p in folder.iterdir():
                if is_temp(p) and p.name[1:].split(".", 1)[0] in keys:
                    p.unlink(missing_ok=True)
