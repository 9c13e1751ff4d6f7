"""Shared annotation loader: EasyVideoR1's `{problem, options, solution, problem_type, path, data_type, problem_id}`
rows (plus official layouts through each benchmark's adapter) -> `Sample`s, every ground truth parsed up front.

EasyVideoR1's files wrap ground truths in several ways (research/easyvideor1.md §8): `<answer>B</answer>`, Charades-STA's
`<think>{"time": [s, e]}</think><[PLHD21…]>` with no answer tag, JSON strings for grounding, option lists written
"A. …", "A: …" or null. A row whose ground truth cannot be parsed for its problem type is a `LoadError` naming the
row, the id and what to fix; it is never dropped silently.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from evr1_eval.benchmarks.prompts import render_prompt
from evr1_eval.types import Sample

if TYPE_CHECKING:
    from evr1_eval.benchmarks.base import Benchmark, DocumentFlattener, LoadError, LoadResult

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_TYPE_ALIASES = {
    "multiple choice": "multiple choice",
    "multiple_choice": "multiple choice",
    "mcq": "multiple choice",
    "mc": "multiple choice",
    "numerical": "numerical",
    "number": "numerical",
    "numeric": "numerical",
    "regression": "regression",
    "boolean": "boolean",
    "binary classification": "boolean",
    "yes/no": "boolean",
    "temporal grounding": "temporal grounding",
    "spatial-temporal grounding": "spatial-temporal grounding",
    "spatial temporal grounding": "spatial-temporal grounding",
    "spatiotemporal grounding": "spatial-temporal grounding",
    "stvg": "spatial-temporal grounding",
    "open-ended": "open-ended",
    "open ended": "open-ended",
    "free-form": "open-ended",
    "video qa": "open-ended",
    "caption": "caption",
    "rec": "REC",
    "ssr": "SSR",
    "crr": "CRR",
}
_PLACEHOLDER = re.compile(r"<\[PLHD[^\]]{0,200}\]>")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_OPTION = re.compile(r"^\s*\(?([A-Za-z])\)?\s*[.:)\uff1a]\s*(.*)$", re.DOTALL)
_MEDIA_TOKEN = re.compile(r"<(?:video|image)>")
_VIDEO_KEYS = ("path", "video_path", "video")
_SCALAR = (str, int, float, bool)


def canonical_problem_type(value: Any) -> str:
    """Normalise case, underscores and aliases; unknown names are a load error rather than a silent default."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("missing `problem_type`")
    key = " ".join(value.strip().replace("_", " ").split()).lower()
    if key in _TYPE_ALIASES:
        return _TYPE_ALIASES[key]
    if key.replace(" ", "-") in _TYPE_ALIASES:
        return _TYPE_ALIASES[key.replace(" ", "-")]
    raise ValueError(f"unknown problem_type {value!r} (known: {', '.join(sorted(set(_TYPE_ALIASES.values())))})")


def unwrap_ground_truth(value: Any) -> Any:
    """Strip EasyVideoR1's wrappers: last non-empty `<answer>`, else JSON inside `<think>`, minus placeholder tokens."""
    if not isinstance(value, str):
        return value
    text = _PLACEHOLDER.sub("", value).strip()
    answers = [a.strip() for a in _ANSWER.findall(text) if a.strip()]
    if answers:
        return answers[-1]
    if "<answer>" in text.lower():
        raise ValueError("the solution's <answer> tag is empty or unclosed")
    thinks = [t.strip() for t in _THINK.findall(text) if "{" in t]
    if thinks:
        return thinks[-1]
    return text


def parse_options(value: Any) -> list[tuple[str, str]]:
    """Options as (letter, text): lists of "A. …"/"A: …"/"(A) …"/plain texts, or {"A": text} mappings, or None."""
    if value is None or value == "":
        return []
    if isinstance(value, Mapping):
        return [(str(k).strip().upper(), str(v).strip()) for k, v in value.items()]
    if isinstance(value, str):
        value = [line for line in value.splitlines() if line.strip()]
    if not isinstance(value, Sequence):
        raise ValueError(f"`options` must be a list, a mapping or null, got {type(value).__name__}")
    out: list[tuple[str, str]] = []
    lettered = all(isinstance(o, str) and _OPTION.match(o) for o in value)
    for i, opt in enumerate(value):
        if not isinstance(opt, _SCALAR):
            raise ValueError(f"option {i} is a {type(opt).__name__}, expected text")
        text = str(opt).strip()
        m = _OPTION.match(text) if lettered else None
        if m:
            out.append((m.group(1).upper(), m.group(2).strip()))
        else:
            out.append((LETTERS[i], text))
    letters = [letter for letter, _ in out]
    if len(set(letters)) != len(letters):
        raise ValueError(f"duplicate option letters {letters}")
    return out


def parse_mc_truth(raw: Any, options: Sequence[tuple[str, str]]) -> str:
    letters = [letter for letter, _ in options] or list(LETTERS[:10])
    if isinstance(raw, bool) or raw is None:
        raise ValueError(f"multiple-choice answer {raw!r} is not an option letter")
    text = str(raw).strip()
    m = re.match(r"^\(?([A-Za-z])\)?(?:[.:)\s]|$)", text)
    if m and m.group(1).upper() in letters:
        return m.group(1).upper()
    matches = [letter for letter, opt in options if opt and opt.strip().lower() == text.lower()]
    if len(matches) == 1:
        return matches[0]
    raise ValueError(f"multiple-choice answer {text[:60]!r} is not one of the option letters {''.join(letters)}")


def parse_number(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"expected a number, got {raw!r}")
    if isinstance(raw, (int, float)):
        value = float(raw)
    else:
        try:
            value = float(str(raw).strip().replace(",", ""))
        except ValueError:
            raise ValueError(f"expected a number, got {str(raw)[:60]!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {raw!r}")
    return value


def _json_object(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        obj = json.loads(str(raw))
    except json.JSONDecodeError:
        raise ValueError(f"expected a JSON object, got {str(raw)[:80]!r}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def parse_span(value: Any) -> list[float]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise ValueError(f'"time" must be [start, end] in seconds, got {value!r}')
    start, end = (parse_number(v) for v in value)
    if end < start:
        raise ValueError(f'"time" span [{start}, {end}] ends before it starts')
    return [start, end]


def parse_box(value: Any) -> list[float]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 4:
        raise ValueError(f"a box must be [x1, y1, x2, y2], got {value!r}")
    return [parse_number(v) for v in value]


def parse_ground_truth(problem_type: str, raw: Any, options: Sequence[tuple[str, str]], row: Mapping[str, Any]) -> Any:
    """The ground truth in the form the scorer expects; raises ValueError saying what is wrong."""
    value = unwrap_ground_truth(raw)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValueError("empty ground truth (`solution`)")
    if problem_type == "multiple choice":
        return parse_mc_truth(value, options)
    if problem_type in ("numerical", "regression"):
        number = parse_number(value)
        return str(int(number)) if number.is_integer() and "." not in str(value) else str(number)
    if problem_type == "REC":
        number = parse_number(value)
        if not number.is_integer() or number < 0:
            raise ValueError(f"REC count must be a non-negative integer, got {value!r}")
        return str(int(number))
    if problem_type in ("boolean", "SSR", "CRR"):
        if problem_type != "boolean" and str(row.get("ovo_type", "")).strip() in ("0", "1"):
            return "Yes" if str(row["ovo_type"]).strip() == "1" else "No"
        word = str(value).strip().rstrip(".").lower()
        if word in ("yes", "y", "true", "1"):
            return "Yes"
        if word in ("no", "n", "false", "0"):
            return "No"
        raise ValueError(f"expected Yes or No, got {str(value)[:60]!r}")
    if problem_type == "temporal grounding":
        obj = _json_object(value)
        return json.dumps({"time": parse_span(obj.get("time"))})
    if problem_type == "spatial-temporal grounding":
        obj = _json_object(value)
        boxes = obj.get("boxes") or {}
        if not isinstance(boxes, Mapping):
            raise ValueError(f'"boxes" must map seconds to [x1, y1, x2, y2], got {type(boxes).__name__}')
        parsed = {str(k): parse_box(v) for k, v in boxes.items()}
        return json.dumps({"time": parse_span(obj.get("time")), "boxes": parsed})
    if not isinstance(value, _SCALAR):
        raise ValueError(f"expected a text answer, got {type(value).__name__}")
    return str(value).strip()


def read_rows(path: Path, flatten: DocumentFlattener | None = None) -> Iterator[tuple[int, Any, str | None]]:
    """Yield (position, row, parse_error) for a JSON list / {"data": [...]} / JSONL / text file, or an official
    nested document when the benchmark has a `flatten`."""
    if not path.is_file():
        raise FileNotFoundError(f"annotation file {path} does not exist; pass --annotations with the benchmark's JSON")
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    if path.suffix == ".jsonl" or (stripped and stripped[0] == "{" and "\n{" in stripped and not _is_json(stripped)):
        for i, line in enumerate(text.splitlines()):
            if not line.strip():
                continue
            try:
                yield i, json.loads(line), None
            except json.JSONDecodeError as exc:
                yield i, None, f"line {i + 1} is not valid JSON ({exc.msg}); fix or delete that line"
        return
    if stripped[:1] in ("[", "{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
        if isinstance(data, Mapping):
            for key in ("data", "annotations", "questions", "samples"):
                if isinstance(data.get(key), list):
                    data = data[key]
                    break
            else:
                if flatten is None:
                    raise ValueError(f"{path}: expected a list of rows or an object with a 'data' list")
                data = flatten(data, path.stem)
        yield from ((i, row, None) for i, row in enumerate(data))
        return
    for i, line in enumerate(text.splitlines()):  # official plain-text layouts (Charades-STA)
        if line.strip():
            yield i, line.strip(), None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def _first(row: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        value = row.get(key)
        if value is not None and value != "":
            return value
    return None


def _resolve(path: Any, media_root: Path | None) -> str:
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"media path must be a non-empty string, got {path!r}")
    p = Path(path.strip())
    return str(p if media_root is None or p.is_absolute() else media_root / p)


def video_folders(row: Mapping[str, Any]) -> list[str]:
    """The folders of a row's (first) video path, without "." / ".." parts: "./clevrer/x/1.mp4" -> [clevrer, x]."""
    video = _first(row, _VIDEO_KEYS)
    if isinstance(video, list):
        video = video[0] if video else None
    if not isinstance(video, str):
        return []
    return [p for p in PurePosixPath(video.replace("\\", "/")).parts[:-1] if p not in (".", "..", "/")]


def first_folder(row: Mapping[str, Any]) -> str | None:
    folders = video_folders(row)
    return folders[0] if folders else None


def parent_folder(row: Mapping[str, Any]) -> str | None:
    folders = video_folders(row)
    return folders[-1] if folders else None


def build_sample(
    bench: Benchmark, row: Mapping[str, Any], position: int | str, media_root: Path | None, style: str
) -> Sample:
    sample_id = _first(row, ("problem_id", *bench.id_fields))
    sample_id = str(position) if sample_id is None else str(sample_id)
    if bench.id_suffix_field is not None and row.get(bench.id_suffix_field) not in (None, ""):
        sample_id = f"{sample_id}#{row[bench.id_suffix_field]}"
    if "problem_type" in row or len(bench.problem_types) != 1:
        problem_type = canonical_problem_type(row.get("problem_type"))
    else:
        problem_type = bench.problem_types[0]
    question = _first(row, ("problem", "question")) or bench.default_question
    if not isinstance(question, str) or not question.strip():
        raise ValueError("missing question text (`problem`)")
    question = _MEDIA_TOKEN.sub("", question).strip()
    template = bench.question_templates.get(problem_type)
    if template:
        question = template.format(question=question)
    options = parse_options(row.get("options"))
    if problem_type == "multiple choice" and not options and not re.search(r"\n\s*\(?[A-J][.):]", question):
        raise ValueError("multiple-choice row has no options (neither `options` nor lettered lines in the question)")
    if "solution" not in row and "answer" not in row:
        raise ValueError("missing ground truth (`solution`)")
    truth = parse_ground_truth(problem_type, row.get("solution", row.get("answer")), options, row)
    video = _first(row, _VIDEO_KEYS)
    if video is None:
        raise ValueError("missing video path (`path`)")
    if isinstance(video, list):
        videos = tuple(_resolve(v, media_root) for v in video)
    else:
        videos = (_resolve(video, media_root),)
    image = _first(row, ("image_path", "image"))
    images = (
        () if image is None else tuple(_resolve(i, media_root) for i in (image if isinstance(image, list) else [image]))
    )
    groups: dict[str, str] = {}
    for name, keys in bench.group_fields.items():
        value = _first(row, keys)
        if value is not None:
            groups[name] = str(value)
    for name, derive in bench.derived_groups.items():
        if name not in groups:
            value = derive(row)
            if value:
                groups[name] = value
    formatted = tuple(f"{letter}. {text}" for letter, text in options)
    extras = {k: v for k, v in row.items() if isinstance(v, _SCALAR) and k not in ("problem", "solution", "options")}
    extras["option_letters"] = "".join(letter for letter, _ in options)
    extras["question"] = question
    if images:
        question = f"{question}\nThe image for this question is at the end of the video."
    return Sample(
        id=sample_id,
        benchmark=bench.name,
        prompt=render_prompt(problem_type, question, formatted, style),
        ground_truth=truth,
        problem_type=problem_type,
        videos=videos,
        images=images,
        options=formatted,
        groups=groups,
        extras=extras,
    )


def load_samples(bench: Benchmark, annotations: Path, media_root: Path | None, *, style: str = "direct") -> LoadResult:
    from evr1_eval.benchmarks.base import LoadError, LoadResult
    from evr1_eval.benchmarks.prompts import STYLES

    if style not in STYLES:
        raise ValueError(f"unknown prompt style {style!r}; choose one of {', '.join(STYLES)}")
    samples: list[Sample] = []
    errors: list[LoadError] = []
    warnings: list[LoadError] = []
    seen: dict[str, tuple[int, Any]] = {}
    for file, position, raw, parse_error in _annotation_rows(bench, annotations):
        if parse_error is not None:
            errors.append(LoadError(position, None, f"{file.name}: {parse_error}"))
            continue
        row_id = str(raw.get("problem_id")) if isinstance(raw, Mapping) and "problem_id" in raw else None
        try:
            row = raw
            needs_adapter = not isinstance(row, Mapping) or "problem" not in row
            if needs_adapter and bench.adapter is not None:
                row = bench.adapter(row)
            if not isinstance(row, Mapping):
                raise ValueError(f"expected a JSON object, got {type(row).__name__}")
            # in a folder of files, a row without an id is named by its file and position
            label = position if file == annotations else f"{file.stem}:{position}"
            sample = build_sample(bench, row, label, media_root, style)
        except (ValueError, TypeError, KeyError) as exc:
            reason = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            errors.append(LoadError(position, row_id, f"{file.name} row {position}: {reason}"))
            continue
        if sample.id in seen:
            first, first_raw = seen[sample.id]
            if first_raw == raw:
                errors.append(
                    LoadError(position, sample.id, f"{file.name} row {position}: exact duplicate of row {first}")
                )
                continue
            new_id = next(f"{sample.id}#{k}" for k in range(2, len(seen) + 3) if f"{sample.id}#{k}" not in seen)
            warnings.append(
                LoadError(
                    position,
                    new_id,
                    f"{file.name} row {position}: id {sample.id!r} already used by row {first} for a different "
                    f"question; this row is loaded as {new_id!r} (ids must be unique for resume: give it its own "
                    "`problem_id` to choose the name)",
                )
            )
            sample = dataclasses.replace(sample, id=new_id)
        seen[sample.id] = (position, raw)
        samples.append(sample)
    return LoadResult(samples=samples, errors=errors, warnings=warnings)


def annotation_files(annotations: Path) -> list[Path]:
    """The file itself, or every .json/.jsonl/.txt file of a folder (official releases split a benchmark over
    several files: TempCompass' four question formats, MVBench's per-task files), sorted by name."""
    if not annotations.is_dir():
        return [annotations]
    files = sorted(p for p in annotations.iterdir() if p.is_file() and p.suffix.lower() in (".json", ".jsonl", ".txt"))
    if not files:
        raise FileNotFoundError(f"annotation folder {annotations} holds no .json/.jsonl/.txt file")
    return files


def _annotation_rows(bench: Benchmark, annotations: Path) -> Iterator[tuple[Path, int, Any, str | None]]:
    for file in annotation_files(annotations):
        for position, raw, parse_error in read_rows(file, bench.flatten):
            yield file, position, raw, parse_error
