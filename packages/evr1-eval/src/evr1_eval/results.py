"""The on-disk record of a run: append-only `results*.jsonl` rows, `run*.json` settings, `summary.json`.

Layout, one folder per benchmark under the run's `--out`:
    OUT/<benchmark>/run.json            settings that change numbers (a resume with other settings is refused)
    OUT/<benchmark>/results.jsonl       one ScoredSample per line, flushed per line, last row per id wins
    OUT/<benchmark>/summary.json        official aggregation (single-machine runs; `report` merges shards)
With `--world-size W` each rank r writes `run.rank<r>-of-<W>.json` and `results.rank<r>-of-<W>.jsonl` instead, so
machines never share a file; `load_rows` merges every results file of a folder.

Resume never assumes finished rows form a prefix: it reads every id present. A torn last line (the process died in
the middle of a write) is dropped and the file is truncated back to the last complete line before appending.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from evr1_eval.types import BenchmarkSummary, Sample, ScoredSample

RESULTS_GLOB = "results*.jsonl"
SCHEMA_VERSION = 1


class SettingsMismatch(RuntimeError):
    """A resumed run would mix results produced under different settings."""


def shard_suffix(rank: int, world_size: int) -> str:
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank} world_size={world_size}")
    return "" if world_size == 1 else f".rank{rank}-of-{world_size}"


def select(samples: Sequence[Sample], *, limit: int | None, rank: int, world_size: int) -> list[Sample]:
    """The samples rank `rank` evaluates: the first `limit`, then every `world_size`-th from `rank` (ranks are
    disjoint and complete); what its results file holds once it has finished."""
    chosen = list(samples[:limit] if limit is not None else samples)
    return chosen[rank::world_size]


def results_path(bench_dir: Path, rank: int = 0, world_size: int = 1) -> Path:
    return Path(bench_dir) / f"results{shard_suffix(rank, world_size)}.jsonl"


def settings_path(bench_dir: Path, rank: int = 0, world_size: int = 1) -> Path:
    return Path(bench_dir) / f"run{shard_suffix(rank, world_size)}.json"


def read_run_settings(bench_dir: Path, problems: list[str] | None = None) -> dict[str, Any]:
    """The first readable `run*.json` of a benchmark folder ({} when none); each unreadable one is noted in
    `problems` when given."""
    for path in sorted(bench_dir.glob("run*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            if problems is not None:
                problems.append(f"{path}: unreadable settings ({exc})")
            continue
        if isinstance(data, dict):
            return data
    return {}


def row_to_dict(row: ScoredSample) -> dict[str, Any]:
    return {"schema": SCHEMA_VERSION, **dataclasses.asdict(row)}


def row_from_dict(data: Mapping[str, Any]) -> ScoredSample:
    """Rebuild a row; unknown keys (written by a newer version) are ignored, missing optional ones default."""
    names = {f.name for f in dataclasses.fields(ScoredSample)}
    return ScoredSample(**{k: v for k, v in data.items() if k in names})


def row_problem(row: ScoredSample) -> str | None:
    """Why a row read from disk is not a well-formed ScoredSample (a field of the wrong type, a score that is not a
    finite number in [0, 1]), or None. Such a row is left out of every aggregation and named by `evr1_eval.verify`.
    (Rows are rebuilt from JSON without type checks: the field values are looked at as the objects they are.)"""
    values: dict[str, object] = {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}
    for name in ("id", "benchmark", "problem_type", "response", "extracted", "error"):
        value = values[name]
        if not isinstance(value, str) and (value is not None or name in ("id", "benchmark", "problem_type")):
            return f"`{name}` is a {type(value).__name__}, not text"
    groups, details = values["groups"], values["details"]
    if not isinstance(groups, Mapping) or not all(isinstance(v, str) for v in groups.values()):
        return "`groups` is not an object of texts"
    if not isinstance(details, Mapping):
        return "`details` is not an object"
    if not isinstance(values["needs_judge"], bool):
        return "`needs_judge` is not a boolean"
    for name in ("score", "evr1_score"):
        score = values[name]
        if score is None and name == "evr1_score":
            continue
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            return f"{name} {score!r} is not a number"
        if not 0.0 <= float(score) <= 1.0:
            return f"{name} {score!r} is outside [0, 1]"
    return None


def file_sha256(*files: Path, names: bool = False) -> str:
    """`sha256:<hex>` of the files' contents in order (each preceded by its name when `names`), read in 1 MiB chunks."""
    h = hashlib.sha256()
    for file in files:
        if names:
            h.update(file.name.encode() + b"\0")
        with open(file, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    return f"sha256:{h.hexdigest()}"


def write_json_atomic(path: Path, data: Any) -> None:
    """evr1-eval's JSON layout (sorted keys, indent 2), written with the one atomic-write helper (evr1_cache.atomic)."""
    from evr1_cache.atomic import atomic_text

    atomic_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _complete_length(path: Path) -> int:
    """Byte length of the file up to and including its last newline (what survives a torn write)."""
    return path.read_bytes().rfind(b"\n") + 1


def iter_rows(path: Path) -> Iterator[ScoredSample]:
    """Rows of one results file; an unparsable line is skipped (a torn tail) unless it sits mid-file."""
    path = Path(path)
    if not path.exists():
        return
    lines = path.read_bytes().split(b"\n")
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            yield row_from_dict(json.loads(raw))
        except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as exc:
            if lineno == len(lines):  # no newline after it: a write that was cut off
                return
            raise ValueError(
                f"{path}:{lineno}: corrupt results row ({exc}); fix or delete that line, then resume"
            ) from exc


def load_rows(bench_dir: Path) -> list[ScoredSample]:
    """Every well-formed row of every results file in a benchmark folder (all ranks), one per id: the last written
    wins."""
    rows: dict[str, ScoredSample] = {}
    for path in sorted(Path(bench_dir).glob(RESULTS_GLOB)):
        for row in iter_rows(path):
            if row_problem(row) is None:  # a malformed row is never aggregated (evr1_eval.verify names it)
                rows[row.id] = row
    return list(rows.values())


class ResultsStore:
    """Append-only JSONL of one (benchmark, rank): read finished ids, then append rows flushed one by one."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fh: IO[str] | None = None

    def finished(self, *, retry_errors: bool = False) -> dict[str, ScoredSample]:
        """Rows already written, by id; with `retry_errors`, error rows are left out so they run again."""
        done: dict[str, ScoredSample] = {}
        for row in iter_rows(self.path):
            if retry_errors and row.error is not None:
                done.pop(row.id, None)
            else:
                done[row.id] = row
        return done

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            keep = _complete_length(self.path)
            if keep != self.path.stat().st_size:
                with open(self.path, "r+b") as fh:  # drop a torn tail so the next row starts on its own line
                    fh.truncate(keep)
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  (kept open for the whole run)

    def append(self, row: ScoredSample) -> None:
        if self._fh is None:
            self.open()
        assert self._fh is not None
        self._fh.write(json.dumps(row_to_dict(row), ensure_ascii=False, default=str) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def check_settings(path: Path, fingerprint: Mapping[str, Any], info: Mapping[str, Any]) -> None:
    """Record the run's settings, or refuse when an existing record differs in anything that changes numbers."""
    path = Path(path)
    new = json.loads(json.dumps(fingerprint, default=str, sort_keys=True))
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8")).get("fingerprint", {})
        diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        if diff:
            lines = [
                f"  {k}: recorded {json.dumps(old.get(k))[:200]} != now {json.dumps(new.get(k))[:200]}" for k in diff
            ]
            raise SettingsMismatch(
                f"{path} was written with other settings; resuming would mix results.\n"
                + "\n".join(lines)
                + "\nUse the recorded settings, or a new --out directory for the new ones."
            )
    write_json_atomic(path, {"fingerprint": new, "info": dict(info)})


def write_summary(path: Path, summary: BenchmarkSummary, extra: Mapping[str, Any] | None = None) -> None:
    write_json_atomic(path, {**dataclasses.asdict(summary), **dict(extra or {})})


def dedupe_ids(ids: Iterable[str]) -> list[str]:
    """Ids that occur more than once (a benchmark file with duplicate ids cannot be resumed safely)."""
    return [i for i, n in Counter(ids).items() if n > 1]


@dataclass(frozen=True, slots=True)
class Sources:
    """Where a run's annotations, media and frames are (given on the command line, else read from the run's record)."""

    annotations_dir: Path | None = None
    media_root: Path | None = None
    cache_dir: Path | None = None
    #: the run was given `--allow-outside-media`: its media may lie outside the annotations' folder / media root
    allow_outside_media: bool = False
    #: the URL schemes the run was given with `--allow-remote-media` (its URLs were downloaded once)
    allow_remote_media: tuple[str, ...] = ()


def recorded_sources(settings: Mapping[str, Any]) -> Sources:
    """The `--annotations-dir`, `--media-root` and `--cache-dir` of the `run` command recorded in run.json (its
    `sources`, else read off the recorded command line)."""
    sources = (settings.get("info") or {}).get("sources")
    if isinstance(sources, Mapping):
        annotations, media, cache = (
            Path(p) if isinstance(p, str) else None
            for p in (sources.get("annotations_dir"), sources.get("media_root"), sources.get("cache_dir"))
        )
        remote = sources.get("allow_remote_media")
        schemes = tuple(str(s) for s in remote) if isinstance(remote, list) else ()
        return Sources(annotations, media, cache, bool(sources.get("allow_outside_media")), schemes)
    argv = (settings.get("info") or {}).get("command") or []
    if not isinstance(argv, list):
        return Sources()
    found: dict[str, Path] = {}
    for i, token in enumerate(argv):
        for flag in ("--annotations-dir", "--media-root", "--cache-dir"):
            if token == flag and i + 1 < len(argv):
                found[flag] = Path(str(argv[i + 1]))
            elif isinstance(token, str) and token.startswith(flag + "="):
                found[flag] = Path(token.split("=", 1)[1])
    outside = "--allow-outside-media" in argv
    return Sources(found.get("--annotations-dir"), found.get("--media-root"), found.get("--cache-dir"), outside)
