"""Results you can verify: every stored row re-scored offline and checked against the annotations and the run's record.

Why: an evaluation report is a claim other people rely on, and `report` used to believe whatever the results files
said (scores edited from 0 to 1, rows for unknown ids, an extra `results.x.jsonl`, deleted rows, a torn line, a score
of 7.5 or NaN, another benchmark's rows, a changed model name: each passed silently, 50% became 100%). Here:

- a run records in its `manifest.json` (`files`) every file it wrote, with its SHA-256 (`record_written`);
- `verify_benchmark` reads every results file line by line and flags: lines that are not complete rows (torn or
  corrupt), rows of another benchmark, scores outside [0, 1] or NaN, ids not in the annotations, an id written twice
  (only a retried error row may be followed by another row), ids the run selected but never wrote, rows whose stored
  score differs from the benchmark's scorer on the stored response (both protocols; an LLM-judged official score is
  left as it is, its evr1 score is still checked), results files the run did not write or that changed since, and a
  model or settings in `manifest.json` that differ from `run.json`'s record;
- a clean benchmark reads "verified N/N"; `report`, `score` and a resume print the problems and exit non-zero.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evr1_eval.results import RESULTS_GLOB, file_sha256, read_run_settings, row_from_dict, row_problem
from evr1_eval.types import OFFICIAL_READING, Reading

if TYPE_CHECKING:
    from evr1_eval.presets import ResponseFilter
    from evr1_eval.types import Sample, ScoredSample

#: Files a run writes into a benchmark folder, recorded with their hashes in manifest.json (`files`).
WRITTEN = (RESULTS_GLOB, "run*.json", "summary.json", "load_errors*.json")
#: Stored and re-computed scores closer than this are equal (scores are JSON floats: exact, but keep a margin).
TOLERANCE = 1e-9
#: Manifest fields compared with run.json's fingerprint: what `check_settings` refuses to mix on a resume.
_SETTINGS = ("sampling", "generation", "system_prompt", "judge", "prompt_version", "protocol", "answer_tags",
             "reasoning_tags")  # fmt: skip


class Rescorer(Protocol):
    """What verifying needs from a benchmark: its name, its scorer, the types it may judge. `evr1_eval.api.base.
    Benchmark` is one, and the runner's `BenchmarkLike` extends it (a test double included)."""

    @property
    def name(self) -> str: ...

    @property
    def judge_optional_types(self) -> frozenset[str]: ...

    def score(self, sample: Sample, response: str | None, *, reading: Reading = OFFICIAL_READING) -> ScoredSample: ...


@dataclass(frozen=True, slots=True)
class Verification:
    """What verifying one benchmark folder found: `verified` of `total` rows re-scored equal, and every problem."""

    benchmark: str
    verified: int
    total: int
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems and self.verified == self.total

    def line(self) -> str:
        """One line for the terminal and report.md: "mvbench: verified 64/64" (and the problem count)."""
        tail = "" if not self.problems else f"; {len(self.problems)} problem(s), results NOT verified"
        return f"{self.benchmark}: verified {self.verified}/{self.total}{tail}"


def written_files(bench_dir: Path) -> dict[str, dict[str, Any]]:
    """{file name: {"sha256", "bytes"}} of the files a run writes, as they are now."""
    paths = (path for pattern in WRITTEN for path in sorted(Path(bench_dir).glob(pattern)) if path.is_file())
    return {path.name: {"sha256": file_sha256(path), "bytes": path.stat().st_size} for path in paths}


def record_writing(bench_dir: Path, names: Sequence[str]) -> None:
    """Mark `names` as being written in manifest.json (their old hashes no longer hold); `record_written` ends it."""
    record_written(bench_dir, names, done=False)


def record_written(bench_dir: Path, names: Sequence[str], *, done: bool = True) -> None:
    """Record the SHA-256 of the files `names` this run wrote in manifest.json's `files`, keeping what other ranks
    recorded; an atomic rewrite (`done=False`: `record_writing`)."""
    from evr1_eval import manifest
    from evr1_eval.results import write_json_atomic

    record = manifest.read(bench_dir) or {}
    files = {k: v for k, v in dict(record.get("files") or {}).items() if k not in names}
    writing = sorted(set(record.get("writing") or ()) - set(names))
    if done:
        now = written_files(bench_dir)
        files.update({n: now[n] for n in names if n in now})
    else:
        writing = sorted({*writing, *names})
    write_json_atomic(
        Path(bench_dir) / manifest.MANIFEST, {**record, "files": dict(sorted(files.items())), "writing": writing}
    )


def _read_lines(path: Path) -> tuple[list[tuple[int, ScoredSample]], list[str]]:
    """((line, row) of every complete row, problems: torn or corrupt lines) of one results file."""
    rows: list[tuple[int, ScoredSample]] = []
    problems: list[str] = []
    lines = path.read_bytes().split(b"\n")
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        torn = lineno == len(lines)  # no newline after it: a write cut off, or an edit
        try:
            value = json.loads(raw)
            if not isinstance(value, dict):
                raise TypeError(f"a JSON {type(value).__name__}, not a row")
            rows.append((lineno, row_from_dict(value)))
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            what = "torn last line (no newline)" if torn else "corrupt line"
            problems.append(f"{path.name} line {lineno}: {what}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        if torn:
            problems.append(f"{path.name} line {lineno}: torn last line (no newline after a complete row)")
    return rows, problems


def _differs(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(float(a) - float(b)) > TOLERANCE


def _rescore(
    bench: Rescorer,
    sample: Sample,
    row: ScoredSample,
    response_filter: ResponseFilter,
    judged: bool,
    reading: Reading = OFFICIAL_READING,
) -> tuple[float | None, float | None, str]:
    """(official score or None when it cannot be re-computed offline, evr1 score, what the official one is)."""
    from evr1_eval.presets import apply_response_filter

    if row.error is not None:
        return 0.0, None, "an error row"
    text = apply_response_filter(row.response or "", response_filter)
    fresh = bench.score(sample, text, reading=reading)
    if fresh.needs_judge or (judged and sample.problem_type in bench.judge_optional_types):
        return (None if not row.needs_judge else 0.0), fresh.evr1_score, "LLM-judged"
    return fresh.score, fresh.evr1_score, "the scorer's"


def _settings_problems(record: Mapping[str, Any] | None, settings: Mapping[str, Any]) -> list[str]:
    """manifest.json against run.json's fingerprint: the model and every number-changing setting."""
    if not record:
        return ["manifest.json is missing or unreadable: the run's settings cannot be checked"]
    fingerprint = dict(settings.get("fingerprint") or {})
    if not fingerprint:
        return []
    out: list[str] = []
    model = (fingerprint.get("backend") or {}).get("model")
    if record.get("model") != model:
        out.append(f"manifest.json names model {record.get('model')!r}, the run's record (run.json) {model!r}")
    for key in _SETTINGS:
        if key in fingerprint and json.dumps(record.get(key), sort_keys=True, default=str) != json.dumps(
            fingerprint.get(key), sort_keys=True, default=str
        ):
            out.append(f"manifest.json's {key} differs from the run's record (run.json)")
    if fingerprint.get("benchmark") and record.get("benchmark") != fingerprint.get("benchmark"):
        out.append(f"manifest.json is for benchmark {record.get('benchmark')!r}, run.json {fingerprint['benchmark']!r}")
    return out


def _recorded_reading(record: Mapping[str, Any] | None, fingerprint: Mapping[str, Any]) -> tuple[Reading, str | None]:
    """The reading the rows were scored with (run.json's fingerprint first, then the manifest; a missing key: its
    default), and the problem when a name is one this version does not know (the rows are then re-scored with the
    official reading, and fail to verify if they were read otherwise)."""
    keys = Reading().record()
    recorded = {k: fingerprint.get(k) or (record or {}).get(k) for k in keys}
    try:
        return Reading.from_record(recorded), None
    except ValueError as exc:
        return OFFICIAL_READING, f"manifest.json / run.json: {exc}: rows re-scored with the official reading"


def _file_problems(bench_dir: Path, record: Mapping[str, Any] | None, *, resume: bool) -> list[str]:
    """Results files the run did not write, files changed or deleted since it recorded them, runs not finished (on a
    resume, an unfinished file is expected and an unrecorded one only means the run was interrupted)."""
    files = dict((record or {}).get("files") or {})
    writing = set((record or {}).get("writing") or ())
    if not files and not writing:
        return [] if resume else ["manifest.json records no written files (an unfinished run, or an older evr1-eval)"]
    out: list[str] = []
    now = written_files(bench_dir)
    for name, info in sorted(now.items()):
        recorded = files.get(name)
        if name in writing:
            if not resume:
                out.append(f"{name}: the run writing it has not finished (interrupted? resume it)")
        elif recorded is None:
            if name.startswith("results"):
                out.append(f"{name}: a results file the run did not write")
        elif recorded.get("sha256") != info["sha256"]:
            out.append(f"{name}: changed since the run wrote it (SHA-256 differs from manifest.json)")
    out += [f"{name}: written by the run, now missing" for name in sorted(set(files) - set(now))]
    return out


@dataclass(frozen=True, slots=True)
class Annotations:
    """The samples a benchmark's rows are checked against, and the ids its run selected (None: unknown)."""

    samples: Mapping[str, Sample]
    selected: frozenset[str] | None
    note: str | None = None


def verify_rows(
    bench: Rescorer,
    rows: Sequence[tuple[str, ScoredSample]],
    annotations: Annotations | None,
    *,
    response_filter: ResponseFilter = "none",
    judged: bool = False,
    reading: Reading = OFFICIAL_READING,
) -> tuple[int, list[str]]:
    """(ids whose rows all verify, problems) for `rows` given as (where, row) in file order (module docstring)."""
    problems: list[str] = []
    ok: dict[str, bool] = {}
    seen: dict[str, tuple[str, ScoredSample]] = {}
    for where, row in rows:
        malformed = row_problem(row)
        bad = [f"{where}: {malformed}"] if malformed else []
        if row.benchmark != bench.name:
            bad.append(f"{where}: a row of benchmark {row.benchmark!r}")
        earlier = seen.get(row.id)
        if earlier is not None and earlier[1].error is None:
            bad.append(f"{where}: id {row.id!r} written again (first at {earlier[0]}); only error rows are retried")
        seen[row.id] = (where, row)
        sample = annotations.samples.get(row.id) if annotations is not None else None
        if annotations is not None and sample is None:
            bad.append(f"{where}: id {row.id!r} is not in the annotations")
        if sample is not None and not bad:  # a well-formed row of this benchmark: its scores re-computed
            official, evr1, what = _rescore(bench, sample, row, response_filter, judged, reading)
            if official is not None and _differs(official, row.score):
                bad.append(f"{where}: id {row.id!r} stored score {row.score!r}, {what} score {official!r}")
            if row.error is None and _differs(evr1, row.evr1_score):
                bad.append(f"{where}: id {row.id!r} stored evr1_score {row.evr1_score!r}, re-scored {evr1!r}")
        problems += bad
        ok[row.id] = not bad and sample is not None and ok.get(row.id, True)
    if annotations is not None and annotations.selected is not None:
        missing = sorted(annotations.selected - set(seen))
        if missing:
            problems.append(f"{len(missing)} selected id(s) have no row, e.g. {missing[:5]}")
    return sum(ok.values()), problems


def verify_benchmark(
    bench_dir: Path, bench: Rescorer, annotations: Annotations | str, *, resume: bool = False
) -> Verification:
    """Verify one benchmark folder of a run (module docstring) against `annotations` (a string: why they could not be
    loaded; rows are then checked without them); `resume`: the check before a resume (a torn tail, missing rows and
    an unfinished run are expected there). Never raises for what the folder holds."""
    from evr1_eval import manifest
    from evr1_eval.presets import RESPONSE_FILTERS

    bench_dir = Path(bench_dir)
    record = manifest.read(bench_dir)
    settings = read_run_settings(bench_dir)
    problems = _file_problems(bench_dir, record, resume=resume)
    if not resume:
        problems += _settings_problems(record, settings)
    rows: list[tuple[str, ScoredSample]] = []
    for path in sorted(bench_dir.glob(RESULTS_GLOB)):
        found, torn = _read_lines(path)
        problems += [p for p in torn if not (resume and "torn last line" in p)]  # a crash's tail: dropped on resume
        rows += [(f"{path.name} line {n}", row) for n, row in found]
    checked: Annotations | None = None
    if isinstance(annotations, str):
        problems.append(annotations)
    else:
        problems += [annotations.note] if annotations.note else []
        checked = Annotations(annotations.samples, None) if resume else annotations
    fingerprint = dict(settings.get("fingerprint") or {})
    named = str(fingerprint.get("response_filter") or (record or {}).get("response_filter") or "none")
    # a name this version does not know: the text as written (what `apply_response_filter` does with it)
    response_filter: ResponseFilter = next((f for f in RESPONSE_FILTERS if f == named), "none")
    reading, unknown = _recorded_reading(record, fingerprint)
    problems += [unknown] if unknown else []
    verified, row_problems = verify_rows(
        bench,
        rows,
        checked,
        response_filter=response_filter,
        judged=bool(fingerprint.get("judge")),
        reading=reading,
    )
    problems += row_problems
    ids = {row.id for _, row in rows} | set(checked.selected or () if checked is not None else ())
    return Verification(bench.name, verified, max(len(ids), verified), tuple(problems))
