"""Official annotation layouts -> EasyVideoR1 rows, so one loader serves both.

Field names follow the official releases (EasyVideoR1's files keep the official fields next to its own: Video-MME's
`videoID/question/options/answer`, MVBench's `video/question/candidates/answer`, ...). They were checked against
those field lists and EasyVideoR1's files, not against the releases' downloads (see docs/eval-benchmarks.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.loading import LETTERS

_VIDEO_FIELDS = ("video_path", "video", "path")


def _video(row: Mapping[str, Any]) -> str:
    for key in _VIDEO_FIELDS:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
    for key in ("videoID", "video_id", "vid"):
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            name = value.strip()
            return name if "." in name.rsplit("/", 1)[-1] else f"{name}.mp4"
    raise ValueError("no video field (tried video_path, video, path, videoID, video_id)")


def official_mc(row: Any) -> Mapping[str, Any]:
    """`{question, candidates|options, answer|correct_choice, video...}` (MVBench, MLVU, LongVideoBench, Video-MME):
    the answer may be a letter, the option text, or a 0-based index (`correct_choice`)."""
    if not isinstance(row, Mapping):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    question = row.get("question")
    if not isinstance(question, str):
        raise ValueError("official row has no `question` text")
    options = row.get("candidates", row.get("options"))
    if not isinstance(options, Sequence) or isinstance(options, str) or len(options) < 2:
        raise ValueError("official row has no `candidates`/`options` list")
    texts = [str(o) for o in options]
    lettered = all(re.match(r"^\(?[A-Z]\)?[.:)]\s", t) for t in texts)
    formatted = texts if lettered else [f"{LETTERS[i]}. {t}" for i, t in enumerate(texts)]
    answer = row.get("correct_choice", row.get("answer"))
    if isinstance(answer, int) and not isinstance(answer, bool):
        if not 0 <= answer < len(texts):
            raise ValueError(f"answer index {answer} is outside the {len(texts)} options")
        letter = LETTERS[answer]
    elif isinstance(answer, str) and answer.strip():
        text = answer.strip()
        plain = [re.sub(r"^\(?[A-Z]\)?[.:)]\s*", "", t).strip() if lettered else t.strip() for t in texts]
        if text in plain:
            letter = LETTERS[plain.index(text)]
        elif re.fullmatch(r"\(?[A-Za-z]\)?\.?", text):
            letter = text.strip("().").upper()
        else:
            raise ValueError(f"answer {text[:60]!r} is neither an option letter nor an option text")
    else:
        raise ValueError("official row has no `answer`/`correct_choice`")
    return {
        **row,
        "problem": question,
        "options": formatted,
        "solution": f"<answer>{letter}</answer>",
        "problem_type": "multiple_choice",
        "path": _video(row),
    }


def vsibench_official(row: Any) -> Mapping[str, Any]:
    """VSI-Bench release rows `{id, dataset, scene_name, question_type, question, options, ground_truth}`;
    the video is `<dataset>/<scene_name>.mp4`; rows with options are MC, the others numeric (regression)."""
    if not isinstance(row, Mapping):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    for key in ("question", "ground_truth", "scene_name", "dataset"):
        if row.get(key) in (None, ""):
            raise ValueError(f"VSI-Bench row has no `{key}`")
    options = row.get("options") or None
    return {
        **row,
        "problem": row["question"],
        "options": options,
        "solution": f"<answer>{row['ground_truth']}</answer>",
        "problem_type": "multiple_choice" if options else "regression",
        "path": f"{row['dataset']}/{row['scene_name']}.mp4",
    }


def charades_official(row: Any) -> Mapping[str, Any]:
    """Charades-STA `charades_sta_test.txt` lines: `VIDEOID START END##sentence`."""
    if isinstance(row, Mapping):
        raise ValueError("Charades-STA row has neither EasyVideoR1 fields (`problem`, `solution`) nor the txt layout")
    m = re.fullmatch(r"(\S+)\s+([\d.]+)\s+([\d.]+)##(.+)", str(row).strip())
    if m is None:
        raise ValueError(f"expected 'VIDEOID START END##sentence', got {str(row)[:80]!r}")
    vid, start, end, sentence = m.groups()
    return {
        "problem": sentence.strip(),
        "problem_type": "temporal_grounding",
        "solution": json.dumps({"time": [float(start), float(end)]}),
        "path": f"{vid}.mp4",
    }
