"""`build_cache`: cache every video and image of every row of a dataset file, resumably, shardable without coordination.

Flow: read the rows (JSON / JSONL / Parquet through `datasets`, as verl does) -> resolve every media path (relative to
the data file or `media_root`) -> one job per distinct content (a video used by many rows is decoded once) -> keep the
jobs of this `rank` (hash of the entry key modulo `world_size`: any launcher, no coordination) -> skip finished entries
(resume) -> decode/resize/write atomically, `workers` processes -> append every outcome to this rank's index JSONL ->
write the error report and the output dataset (rows + cache reference + `VideoMeta` of each video).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evr1_cache.errors import MediaError
from evr1_cache.spec import ImageSpec, SamplingSpec
from evr1_cache.store import (
    CorruptEntry,
    entry_key,
    entry_relpath,
    is_temp,
    meta_to_json,
    read_header,
    source_identity,
    spec_json,
    spec_key,
    write_entry,
)

VIDEO_KEYS = ("videos", "video")
IMAGE_KEYS = ("images", "image")


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What one `build_cache` call did. `ok` is False when any media failed (see `errors`)."""

    rows: int
    videos: int  #: distinct video entries this rank is responsible for
    images: int
    built: int
    skipped: int  #: already finished (resume)
    failed: int
    errors: tuple[str, ...]  #: one line per failure: "file: reason (fix: ...)"
    bytes_written: int
    seconds: float
    output_data: Path | None
    index_file: Path
    error_file: Path | None
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.failed == 0


@dataclass(frozen=True, slots=True)
class _Job:
    kind: str  # "video" | "image"
    path: str
    key: str
    rel: str


def read_rows(data_file: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a JSON, JSONL or Parquet dataset file, read with `datasets` (as verl reads them)."""
    path = Path(data_file)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {path} not found")
    suffix = path.suffix.lower()
    fmt = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}.get(suffix)
    if fmt is None:
        raise ValueError(f"{path}: unsupported dataset format {suffix!r}; use .json, .jsonl or .parquet")
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory(prefix="evr1-cache-ds-") as tmp:
        ds = datasets.load_dataset(fmt, data_files=str(path), split="train", cache_dir=tmp)
        return [dict(row) for row in ds]


def media_of(row: dict[str, Any], keys: Sequence[str]) -> list[str]:
    """The media paths of a row under EasyVideoR1's schema (`videos`/`images` lists, or a single `video`/`image`)."""
    out: list[str] = []
    for key in keys:
        value = row.get(key)
        if value is None:
            continue
        items = [value] if isinstance(value, str) else list(value)
        for item in items:
            if isinstance(item, dict):  # {"video": path, ...} style entries
                item = item.get("video") or item.get("image") or item.get("path")
            if isinstance(item, str) and item:
                out.append(item)
    return out


def resolve(media: str, data_file: Path, media_root: Path | None) -> str:
    if media.startswith("file://"):
        media = media[len("file://") :]
    p = Path(media).expanduser()
    if not p.is_absolute():
        p = (media_root if media_root is not None else data_file.parent) / p
    return os.path.abspath(str(p))


def owner(key: str, world_size: int) -> int:
    """The rank that builds `key`: stable across machines and runs, needs no coordination."""
    return int(key[:8], 16) % world_size


def build_cache(
    data_file: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    spec: SamplingSpec,
    image_spec: ImageSpec,
    *,
    media_root: str | os.PathLike[str] | None = None,
    decoder: str = "auto",
    workers: int = 1,
    rank: int = 0,
    world_size: int = 1,
    progress: bool = True,
    output_data: str | os.PathLike[str] | None = None,
    threads: int | None = None,
) -> BuildReport:
    """Cache all media of `data_file` into `out_dir` (see module docstring). Never raises for a bad media file."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank} world_size={world_size}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    t0 = time.perf_counter()
    data_path = Path(data_file)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(media_root) if media_root is not None else None
    rows = read_rows(data_path)

    # distinct media -> job (content-addressed: two paths with the same bytes share one entry)
    errors: dict[str, str] = {}
    jobs: dict[str, _Job] = {}
    row_refs: list[dict[str, list[str]]] = []
    path_to_key: dict[tuple[str, str], str] = {}
    for row in rows:
        refs: dict[str, list[str]] = {"video": [], "image": []}
        for kind, keys, sp in (("video", VIDEO_KEYS, spec), ("image", IMAGE_KEYS, image_spec)):
            for media in media_of(row, keys):
                path = resolve(media, data_path, root)
                refs[kind].append(path)
                if (kind, path) in path_to_key or path in errors:
                    continue
                try:
                    key = entry_key(source_identity(path), sp)
                except OSError as exc:
                    errors[path] = str(_describe_os_error(path, exc))
                    continue
                path_to_key[(kind, path)] = key
                jobs.setdefault(key, _Job(kind, path, key, entry_relpath(sp, key)))
        row_refs.append(refs)

    mine = [job for job in jobs.values() if owner(job.key, world_size) == rank]
    my_errors = {p: e for p, e in errors.items() if owner(_path_hash(p), world_size) == rank}
    _remove_stale_temps(out, mine)
    todo = [job for job in mine if not (out / job.rel).is_file()]
    skipped = len(mine) - len(todo)
    index_file = out / "index" / f"rank-{rank:05d}-of-{world_size:05d}.jsonl"
    index_file.parent.mkdir(parents=True, exist_ok=True)
    for path, err in my_errors.items():
        _append(index_file, {"kind": "media", "source": path, "status": "error", "error": err})

    built = 0
    written = 0
    if threads is None:  # one worker: let the decoder use every core; several: split the cores between them
        threads = 0 if workers == 1 else max(1, (os.cpu_count() or 1) // workers)
    with open(index_file, "a", encoding="utf-8") as index, _progress(len(todo), progress) as bar:
        for job, result in _run(todo, spec, image_spec, decoder, str(out), workers, threads):
            record = {"kind": job.kind, "source": job.path, "key": job.key, "file": job.rel, **result}
            index.write(json.dumps(record, ensure_ascii=False) + "\n")
            index.flush()
            if result["status"] == "ok":
                built += 1
                written += int(result["bytes"])
            else:
                my_errors[job.path] = str(result["error"])
            bar.update(1)
            bar.set_postfix(failed=len(my_errors), refresh=False)

    error_lines = tuple(my_errors[p] for p in sorted(my_errors))
    error_file = out / f"errors.rank-{rank:05d}-of-{world_size:05d}.txt"
    _atomic_text(error_file, "".join(line + "\n" for line in error_lines))
    notes: list[str] = []
    out_data: Path | None = None
    missing = [j for j in jobs.values() if not (out / j.rel).is_file() and j.path not in my_errors]
    if world_size > 1 and missing:
        notes.append(
            f"output dataset not written: {len(missing)} entries belong to other ranks or are unfinished; after all "
            "ranks finish, run the same build once without --rank/--world-size (it only reads headers)"
        )
    else:
        out_data = Path(output_data) if output_data else out / f"{data_path.stem}.evr1.jsonl"
        _write_dataset(out_data, rows, row_refs, path_to_key, jobs, out, {**errors, **my_errors})
    videos = sum(1 for j in mine if j.kind == "video")
    return BuildReport(
        rows=len(rows),
        videos=videos,
        images=len(mine) - videos,
        built=built,
        skipped=skipped,
        failed=len(my_errors),
        errors=error_lines,
        bytes_written=written,
        seconds=time.perf_counter() - t0,
        output_data=out_data,
        index_file=index_file,
        error_file=error_file if error_lines else None,
        notes=tuple(notes),
    )


def build_one(
    kind: str, path: str, key: str, final: str, spec: SamplingSpec, image_spec: ImageSpec, decoder: str, threads: int
) -> dict[str, Any]:
    """Build one entry (runs in a worker process): a result dict, never an exception for bad media."""
    try:
        if kind == "video":
            from evr1_cache.decode import decode_video
            from evr1_cache.decoders import get_decoder

            frames, meta = decode_video(path, spec, decoder, threads=threads)
            header = {"kind": "video", "meta": meta_to_json(meta), "decoder": get_decoder(decoder).version()}
            sp: SamplingSpec | ImageSpec = spec
        else:
            from evr1_cache.image import load_image

            frames = load_image(path, image_spec)
            header = {"kind": "image", "meta": json.dumps({"height": frames.shape[0], "width": frames.shape[1]})}
            sp = image_spec
        header.update(
            spec_key=spec_key(sp),
            spec=spec_json(sp),
            source=json.dumps({"path": path, "identity": source_identity(path)}, ensure_ascii=False),
        )
        size = write_entry(Path(final), frames, header)
        return {"status": "ok", "bytes": size, "shape": list(frames.shape)}
    except MediaError as exc:
        return {"status": "error", "error": str(exc)}
    except Exception as exc:
        return {"status": "error", "error": f"{path}: {type(exc).__name__}: {exc}"}


def _run(
    todo: list[_Job],
    spec: SamplingSpec,
    image_spec: ImageSpec,
    decoder: str,
    out: str,
    workers: int,
    threads: int,
) -> Iterator[tuple[_Job, dict[str, Any]]]:
    def args(job: _Job) -> tuple[Any, ...]:
        return (job.kind, job.path, job.key, os.path.join(out, job.rel), spec, image_spec, decoder, threads)

    if workers == 1 or len(todo) <= 1:
        for job in todo:
            yield job, build_one(*args(job))
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=_worker_context()) as pool:
        pending: dict[Future[dict[str, Any]], _Job] = {}
        queue = iter(todo)
        for job in queue:
            pending[pool.submit(build_one, *args(job))] = job
            if len(pending) >= 2 * workers:
                break
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                job = pending.pop(fut)
                try:
                    result = fut.result()
                except Exception as exc:
                    result = {"status": "error", "error": f"{job.path}: worker failed ({type(exc).__name__}: {exc})"}
                yield job, result
                nxt = next(queue, None)
                if nxt is not None:
                    pending[pool.submit(build_one, *args(nxt))] = nxt


def _worker_context() -> Any:
    """Workers never fork the caller (it may hold threads and locks: tqdm, pyarrow). A forkserver with the decoding
    stack preloaded starts each worker in milliseconds; where there is none (Windows), spawn."""
    import multiprocessing

    try:
        ctx = multiprocessing.get_context("forkserver")
    except ValueError:
        return multiprocessing.get_context("spawn")
    ctx.set_forkserver_preload(
        ["numpy", "av", "PIL.Image", "safetensors.numpy", "evr1_cache.decode", "evr1_cache.image"]
    )
    return ctx


def _write_dataset(
    target: Path,
    rows: list[dict[str, Any]],
    row_refs: list[dict[str, list[str]]],
    path_to_key: dict[tuple[str, str], str],
    jobs: dict[str, _Job],
    out: Path,
    errors: dict[str, str],
) -> None:
    """Rows + `video_cache` / `image_cache` (one reference per media, None where it failed) + `cache_errors`."""
    meta_memo: dict[str, Any] = {}

    def ref(kind: str, path: str) -> dict[str, Any] | None:
        key = path_to_key.get((kind, path))
        if key is None or not (out / jobs[key].rel).is_file():
            return None
        if key not in meta_memo:
            try:
                header, _ = read_header(out / jobs[key].rel)
                meta_memo[key] = json.loads(header["__metadata__"]["meta"])
            except (CorruptEntry, KeyError, ValueError):
                meta_memo[key] = None
        if meta_memo[key] is None:
            return None
        return {"file": jobs[key].rel, "key": key, "meta": meta_memo[key]}

    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as fh:
        for row, refs in zip(rows, row_refs, strict=True):
            extra: dict[str, Any] = {
                "video_cache": [ref("video", p) for p in refs["video"]],
                "image_cache": [ref("image", p) for p in refs["image"]],
            }
            failed = [
                errors.get(p) or f"{p}: not cached"
                for kind in ("video", "image")
                for p in refs[kind]
                if ref(kind, p) is None
            ]
            extra["cache_errors"] = failed
            out_row = _rebase_media(row, refs, target.parent)
            fh.write(json.dumps({**out_row, **extra}, ensure_ascii=False, default=str) + "\n")
    os.replace(tmp, target)


def _rebase_media(row: dict[str, Any], refs: dict[str, list[str]], base: Path) -> dict[str, Any]:
    """The row with each media path rewritten relative to the output dataset's folder.

    The output file usually lives elsewhere than the input (in the cache folder), so paths relative to the input file
    or to `--media-root` would point nowhere from there; relative (not absolute) keeps a moved tree working.
    """
    resolved = {kind: iter(paths) for kind, paths in refs.items()}
    out = dict(row)
    for kind, keys in (("video", VIDEO_KEYS), ("image", IMAGE_KEYS)):
        for key in keys:
            value = row.get(key)
            if value is None:
                continue
            items = [value] if isinstance(value, str) else list(value)
            rebased: list[Any] = []
            for item in items:
                name = item.get("video") or item.get("image") or item.get("path") if isinstance(item, dict) else item
                if not (isinstance(name, str) and name):
                    rebased.append(item)
                    continue
                new = os.path.relpath(next(resolved[kind]), base)
                if isinstance(item, dict):
                    field = next(k for k in ("video", "image", "path") if item.get(k) == name)
                    rebased.append({**item, field: new})
                else:
                    rebased.append(new)
            out[key] = rebased[0] if isinstance(value, str) else rebased
    return out


def _describe_os_error(path: str, exc: OSError) -> MediaError:
    from evr1_cache.probing import check_readable

    try:
        check_readable(path)
    except MediaError as err:
        return err
    return MediaError(path, f"cannot be read ({exc})", "check the file")


def _path_hash(path: str) -> str:
    import hashlib

    return hashlib.blake2b(path.encode(), digest_size=8).hexdigest()


def _remove_stale_temps(out: Path, mine: list[_Job]) -> None:
    """Temp files of this rank's keys can only be left over from a killed run (keys are sharded by rank)."""
    keys_by_folder: dict[Path, set[str]] = {}
    for job in mine:
        keys_by_folder.setdefault((out / job.rel).parent, set()).add(job.key)
    for folder, keys in keys_by_folder.items():
        if folder.is_dir():
            for p in folder.iterdir():
                if is_temp(p) and p.name[1:].split(".", 1)[0] in keys:
                    p.unlink(missing_ok=True)


def _append(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@contextlib.contextmanager
def _progress(total: int, enabled: bool) -> Iterator[Any]:
    from tqdm import tqdm

    bar = tqdm(
        total=total, desc="evr1-cache build", unit="media", disable=not enabled, file=sys.stderr, dynamic_ncols=True
    )
    try:
        yield bar
    finally:
        bar.close()
