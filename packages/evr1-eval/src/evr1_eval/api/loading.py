"""Shared annotation loader: EasyVideoR1's `{problem, options, solution, problem_type, path, data_type, problem_id}`
rows (plus official layouts through each benchmark's adapter) -> `Sample`s, every ground truth parsed up front.

Problem types and ground truths are evr1-rewards' (`normalize_problem_type`, `parse_ground_truth`, `parse_options`):
the vocabulary and the truth readers exist once, in the package that scores them, so a row that loads is a row that
scores. EasyVideoR1's wrappers (`<answer>B</answer>`, Charades-STA's `<think>{"time": [s, e]}</think><[PLHD…]>`,
JSON strings for grounding, options written "A. …", "A: …" or null) are read there; a benchmark that reads a name its
own way passes `Benchmark.type_aliases` (OVO-Bench's "REC" is repetition counting). A row that cannot become a sample
is a `LoadError` naming the file, the row, the id and what to fix; it is never dropped silently, and it never costs
the other rows: a row nested deeper than `MAX_DEPTH` (a crafted file) is one load error, not a `RecursionError` for
the whole file.

Each sample's prompt is the run protocol's (`ProtocolSettings`): the benchmark's official wording (or a model
family's published variant) for `official`, the trainer's `<answer>` format (`Evr1Settings`) for `evr1`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from evr1_cache import MediaError, MediaPaths
from evr1_eval.api.prompts import direct_prompt
from evr1_eval.protocol import ProtocolSettings
from evr1_eval.types import LoadError, LoadResult, Sample
from evr1_rewards import RewardError, normalize_problem_type, parse_ground_truth, parse_options
from evr1_rewards.prompt_format import option_lines

if TYPE_CHECKING:
    from evr1_eval.api.base import Benchmark, DocumentFlattener

#: Deepest nesting of lists / objects an annotation row may have (real rows nest 3-4 levels).
MAX_DEPTH = 32
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_MEDIA_TOKEN = re.compile(r"<(?:video|image)>")
_VIDEO_KEYS = ("path", "video_path", "video", "videos")  # `videos` / `images`: evr1-train's row lists
_IMAGE_KEYS = ("image_path", "image", "images")
_SCALAR = (str, int, float, bool)
_IMAGE_HINT = "The image for this question is at the end of the video."


@dataclass(frozen=True, slots=True, kw_only=True)
class RowView:
    """One annotation row, parsed: what a benchmark's official-doc builder and prompt need."""

    row: Mapping[str, Any]
    sample_id: str
    problem_type: str
    #: Question text (media tokens removed), before any template.
    question: str
    options: tuple[tuple[str, str], ...]
    truth: Any
    videos: tuple[str, ...]
    images: tuple[str, ...]
    groups: Mapping[str, str]


# -- reading files ---------------------------------------------------------------------------------------------------
def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Depth of nested lists / objects (a scalar is 0), counted level by level without recursion; stops past `limit`.
    (Parsed JSON holds only dicts and lists, so exact type checks suffice and keep this cheap per row.)"""
    depth, level = 0, [value]
    while depth <= limit:
        children: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is dict:
                children.extend(item.values())
            elif kind is list or kind is tuple:
                children.extend(item)
        if len(children) == 0:
            return depth + any(type(i) in (dict, list, tuple) for i in level)
        depth += 1
        level = children
    return depth


def _too_deep(value: Any) -> str | None:
    if nesting_depth(value) > MAX_DEPTH:
        return f"nested more than {MAX_DEPTH} levels deep (annotation rows nest a few levels); fix or delete the row"
    return None


def _loads(text: str) -> tuple[Any, str | None]:
    """json.loads that reports (instead of raising) bad JSON and pathological nesting."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg}, column {exc.colno})"
    except RecursionError:
        return None, f"nested more than {MAX_DEPTH} levels deep (JSON too deep to parse); fix or delete the row"


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},]')


def _split_top_array(text: str) -> Iterator[str]:
    """The element texts of a top-level JSON array, found by bracket depth outside strings (no recursion): lets a
    file whose one row is nested 100,000 deep still load its other rows."""
    depth, start = 0, 0
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok[0] == '"':
            continue
        if tok in "[{":
            depth += 1
            if depth == 1:
                start = m.end()
        elif tok == "," and depth == 1:
            yield text[start : m.start()]
            start = m.end()
        elif tok in "]}":
            depth -= 1
            if depth == 0:
                if text[start : m.start()].strip():
                    yield text[start : m.start()]
                return


def _document_rows(
    path: Path, stripped: str, flatten: DocumentFlattener | None
) -> Iterator[tuple[str, int, Any, str | None]]:
    data, error = _loads(stripped)
    if error is not None and "deep" in error and stripped[:1] == "[":
        for i, element in enumerate(_split_top_array(stripped), 1):
            row, err = _loads(element)
            yield "item", i, row, None if err is None else f"{err}; fix or delete that item"
        return
    if error is not None:
        raise ValueError(f"{path} is {error}")
    if isinstance(data, Mapping):
        for key in ("data", "annotations", "questions", "samples"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
        else:
            if flatten is None:
                raise ValueError(f"{path}: expected a list of rows or an object with a 'data' list")
            data = flatten(data, path.stem)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of rows, got {type(data).__name__}")
    for i, row in enumerate(data, 1):
        yield "item", i, row, _too_deep(row)


def read_rows(path: Path, flatten: DocumentFlattener | None = None) -> Iterator[tuple[str, int, Any, str | None]]:
    """Yield (unit, number, row, parse_error) for a JSON list / {"data": [...]} / JSONL / text file, or an official
    nested document when the benchmark has a `flatten`. One numbering for every message: `unit` is "line" (JSONL and
    text files: `number` is the row's 1-based line in the file, blank lines counted) or "item" (a JSON document:
    the row's 1-based position in its list)."""
    if not path.is_file():
        raise FileNotFoundError(f"annotation file {path} does not exist; pass --annotations with the benchmark's JSON")
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    if path.suffix == ".jsonl" or (stripped[:1] == "{" and "\n{" in stripped and _loads(stripped)[1] is not None):
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            row, error = _loads(line)
            error = error or _too_deep(row)
            yield "line", i, row, None if error is None else f"{error}; fix or delete that line"
        return
    if stripped[:1] in ("[", "{"):
        yield from _document_rows(path, stripped, flatten)
        return
    for i, line in enumerate(text.splitlines(), 1):  # official plain-text layouts (Charades-STA)
        if line.strip():
            yield "line", i, line.strip(), None


def annotation_files(annotations: Path) -> list[Path]:
    """The file itself, or every .json/.jsonl/.txt file of a folder (official releases split a benchmark over
    several files: TempCompass' four question formats, MVBench's per-task files), sorted by name."""
    if not annotations.is_dir():
        return [annotations]
    files = sorted(p for p in annotations.iterdir() if p.is_file() and p.suffix.lower() in (".json", ".jsonl", ".txt"))
    if not files:
        raise FileNotFoundError(f"annotation folder {annotations} holds no .json/.jsonl/.txt file")
    return files


# -- one row -> one sample -------------------------------------------------------------------------------------------
def _first(row: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        value = row.get(key)
        if value is not None and value != "":
            return value
    return None


def _resolve(path: Any, media: MediaPaths) -> str:
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"media path must be a non-empty string, got {str(path)[:80]}")
    return media.resolve(path)


def video_folders(row: Mapping[str, Any]) -> list[str]:
    """The folders of a row's (first) video path, without "." / ".." parts: "./clevrer/x/1.mp4" -> [clevrer, x]."""
    video = _first(row, _VIDEO_KEYS)
    if isinstance(video, list):
        video = video[0] if video else None
    if not isinstance(video, str):
        return []
    return [p for p in PurePosixPath(video.replace("\\", "/")).parts[:-1] if p not in (".", "..", "/")]


def first_folder(row: Mapping[str, Any]) -> str | None:
    return next(iter(video_folders(row)), None)


def parent_folder(row: Mapping[str, Any]) -> str | None:
    return next(reversed(video_folders(row)), None)


def _sample_id(bench: Benchmark, row: Mapping[str, Any], position: int | str) -> str:
    sample_id = _first(row, ("problem_id", *bench.id_fields))
    sample_id = str(position) if sample_id is None else str(sample_id)
    if bench.id_suffix_field is not None and row.get(bench.id_suffix_field) not in (None, ""):
        sample_id = f"{sample_id}#{row[bench.id_suffix_field]}"
    return sample_id


def _problem_type(bench: Benchmark, row: Mapping[str, Any]) -> str:
    """evr1-rewards' canonical name of the row's `problem_type` (the benchmark's own readings first)."""
    if "problem_type" not in row and len(bench.problem_types) == 1:
        return bench.problem_types[0]
    value = row.get("problem_type")
    if not isinstance(value, str) or not value.strip():
        raise ValueError("missing `problem_type`")
    return normalize_problem_type(value, aliases=bench.type_aliases or None)


_LETTER_MARK = re.compile(r"^\s*\(?([A-Za-z])\)?\s*[.:)\uff1a]")


def _options(value: Any) -> tuple[tuple[str, str], ...]:
    """(letter, text) pairs from evr1-rewards' `parse_options`; every option written with a letter mark but the
    letters repeating is a broken row (reasoning text split into fake options), not options A, B, C, ..."""
    if value is None or value == "" or value == []:
        return ()
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        marks = [_LETTER_MARK.match(v) for v in value]
        letters = [m.group(1).upper() for m in marks if m]
        if len(letters) == len(value) and len(set(letters)) != len(letters):
            raise ValueError(f"duplicate option letters {letters}")
    return tuple(parse_options(value).items)


def _question(bench: Benchmark, row: Mapping[str, Any]) -> str:
    question = _first(row, ("problem", "question")) or bench.default_question
    if not isinstance(question, str) or not question.strip():
        raise ValueError("missing question text (`problem`)")
    return _MEDIA_TOKEN.sub("", question).strip()


def _paths(value: Any, media: MediaPaths) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(_resolve(v, media) for v in (value if isinstance(value, list) else [value]))


def _media(
    row: Mapping[str, Any], media: MediaPaths, needs_video: bool = True
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    video = _first(row, _VIDEO_KEYS)
    if video is None and needs_video:
        raise ValueError("missing video path (`path`)")
    return _paths(video, media), _paths(_first(row, _IMAGE_KEYS), media)


def _groups(bench: Benchmark, row: Mapping[str, Any]) -> dict[str, str]:
    groups: dict[str, str] = {}
    for name, keys in bench.group_fields.items():
        value = _first(row, keys)
        if value is not None and isinstance(value, _SCALAR):
            groups[name] = str(value)
    for name, derive in bench.derived_groups.items():
        if name not in groups:
            value = derive(row)
            if value:
                groups[name] = value
    return groups


def parse_row(bench: Benchmark, row: Mapping[str, Any], position: int | str, media: MediaPaths) -> RowView:
    """Everything of one row that does not depend on the protocol; raises ValueError naming what is wrong (a
    MediaPathError for a media path outside the data folder: evr1_cache.paths)."""
    problem_type = _problem_type(bench, row)
    question = _question(bench, row)
    options = _options(row.get("options"))
    if problem_type == "multiple_choice" and not options and not re.search(r"\n\s*\(?[A-J][.):]", question):
        raise ValueError("multiple-choice row has no options (neither `options` nor lettered lines in the question)")
    if "solution" not in row and "answer" not in row:
        raise ValueError("missing ground truth (neither `solution` nor `answer`)")
    field = "solution" if "solution" in row else "answer"  # the message names the field this file uses
    raw = row[field]
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise ValueError(f"empty ground truth (`{field}`)")
    extras = {"options": [f"{k}. {t}" for k, t in options]} if options else None
    truth = parse_ground_truth(problem_type, raw, extras).text
    videos, images = _media(row, media, bench.needs_video)
    return RowView(
        row=row,
        sample_id=_sample_id(bench, row, position),
        problem_type=problem_type,
        question=question,
        options=options,
        truth=truth,
        videos=videos,
        images=images,
        groups=_groups(bench, row),
    )


def generic_prompt(bench: Benchmark, view: RowView, protocol: ProtocolSettings) -> str:
    """The evr1 protocol's prompt, or the VLMEvalKit / Qwen-style direct prompt of a benchmark without an official
    one (bare queries such as Charades-STA sentences go through the benchmark's question template first)."""
    template = bench.question_templates.get(
        view.groups.get("task", ""), bench.question_templates.get(view.problem_type)
    )
    question = template.format(question=view.question) if template else view.question
    formatted = [f"{letter}. {text}" for letter, text in view.options]
    if protocol.protocol == "evr1":
        n_videos, n_images = len(view.videos), len(view.images)
        if not template:
            question = train_question(view.row, n_videos, n_images) or question
        options = option_lines(view.row.get("options")) or formatted
        return protocol.evr1.render(view.problem_type, question, options, n_videos=n_videos, n_images=n_images)
    if view.images:
        question = f"{question}\n{_IMAGE_HINT}"
    return direct_prompt(view.problem_type, question, formatted)


def train_question(row: Mapping[str, Any], n_videos: int, n_images: int) -> str | None:
    """The question as evr1-train puts it in its prompt: the row's text with its `<video>` / `<image>` markers where
    they are and literal `\\n` read as newlines (evr1-train `data/prompt.py`); None when the row has no usable text or
    more markers than media (the stripped question is used then)."""
    text = _first(row, ("problem", "question"))
    if not isinstance(text, str) or not text.strip():
        return None
    text = text.replace("\\n", "\n")
    markers = _MEDIA_TOKEN.findall(text)
    if markers.count("<video>") > n_videos or markers.count("<image>") > n_images:
        return None
    return text


def build_sample(bench: Benchmark, view: RowView, protocol: ProtocolSettings) -> Sample:
    doc = bench.official_doc(view) if bench.official_doc is not None else None
    extras: dict[str, Any] = {
        k: v for k, v in view.row.items() if isinstance(v, _SCALAR) and k not in ("problem", "solution", "options")
    }
    extras["option_letters"] = "".join(letter for letter, _ in view.options)
    extras["question"] = view.question
    if doc is not None:
        extras["official_doc"] = doc
    return Sample(
        id=view.sample_id,
        benchmark=bench.name,
        prompt=bench.prompt_for(view, doc, protocol),
        ground_truth=view.truth,
        problem_type=view.problem_type,
        videos=view.videos,
        images=view.images,
        options=tuple(f"{letter}. {text}" for letter, text in view.options),
        groups=dict(view.groups),
        extras=extras,
    )


# -- a file -> samples + load errors ---------------------------------------------------------------------------------
def _one_row(bench: Benchmark, raw: Any, label: int | str, media: MediaPaths, protocol: ProtocolSettings) -> Sample:
    row = raw
    if (not isinstance(row, Mapping) or "problem" not in row) and bench.adapter is not None:
        row = bench.adapter(row)
    if not isinstance(row, Mapping):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    return build_sample(bench, parse_row(bench, row, label, media), protocol)


def load_samples(
    bench: Benchmark,
    annotations: Path,
    media_root: Path | None,
    protocol: ProtocolSettings | None = None,
    *,
    allow_outside_media: bool = False,
    allow_remote_media: Iterable[str] = (),
) -> LoadResult:
    """`Benchmark.load`: every row of `annotations` as a Sample (bad rows as LoadErrors), media paths through
    evr1_cache.MediaPaths (relative ones join `media_root`; URLs are downloaded once)."""
    protocol = protocol or ProtocolSettings()
    folder = media_root if media_root is not None else annotations if annotations.is_dir() else annotations.parent
    media = MediaPaths.for_folder(folder, allow_outside=allow_outside_media, allow_remote=allow_remote_media)
    samples: list[Sample] = []
    errors: list[LoadError] = []
    warnings: list[LoadError] = []
    seen: dict[str, tuple[str, Any]] = {}
    rows = ((file, *row) for file in annotation_files(annotations) for row in read_rows(file, bench.flatten))
    for file, unit, number, raw, parse_error in rows:
        where = f"{file.name} {unit} {number}"
        if parse_error is not None:
            errors.append(LoadError(number, None, f"{where}: {parse_error}", unit=unit))
            continue
        row_id = str(raw.get("problem_id")) if isinstance(raw, Mapping) and "problem_id" in raw else None
        # a row without an id is named by its 0-based position (the ids results files already hold), in a folder
        # of files prefixed by its file
        position = number - 1
        label = position if file == annotations else f"{file.stem}:{position}"
        try:
            sample = _one_row(bench, raw, label, media, protocol)
        except (ValueError, TypeError, KeyError, RecursionError, RewardError, MediaError) as exc:  # MediaError: refused
            reason = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            errors.append(LoadError(number, row_id, f"{where}: {reason}", unit=unit))
            continue
        if sample.id in seen:
            first, first_raw = seen[sample.id]
            if first_raw == raw:
                errors.append(LoadError(number, sample.id, f"{where}: exact duplicate of {first}", unit=unit))
                continue
            new_id = next(f"{sample.id}#{k}" for k in range(2, len(seen) + 3) if f"{sample.id}#{k}" not in seen)
            why = (
                f"{where}: id {sample.id!r} already used by {first} for a different question; this row is loaded as "
                f"{new_id!r} (ids must be unique for resume: give it its own `problem_id` to choose the name)"
            )
            warnings.append(LoadError(number, new_id, why, unit=unit))
            sample = dataclasses.replace(sample, id=new_id)
        seen[sample.id] = (f"{unit} {number}" if file == annotations else where, raw)
        samples.append(sample)
    return LoadResult(samples=samples, errors=errors, warnings=warnings)
