"""The problem-type vocabulary: canonical names, their aliases, and how any spelling resolves to one name.

evr1-rewards owns this vocabulary for the whole project (evr1-eval and evr1-train call it; nobody keeps a copy):

- **Constants** for the 14 built-in types (`MULTIPLE_CHOICE`, `NUMERICAL`, … `CODE`) and `BUILTIN_TYPES`.
- **Aliases** (`BUILTIN_ALIASES`): the names datasets use for each type (EasyVideoR1's `"multiple choice"`,
  `"spatial-temporal grounding"`, `"llava"`, …). Scorer plugins add their own through `evr1_rewards.register`.
- **Normalisation** (`name_key`): case, spaces, hyphens, underscores and slashes are not significant, so
  `"Spatial-Temporal Grounding"`, `"spatial_temporal_grounding"` and `"spatial temporal grounding"` are one name.
  `normalize_problem_type(name)` (in `evr1_rewards`, it also sees plugin types) returns the canonical name, or raises
  `UnknownProblemTypeError` with the closest known name.
- **Ambiguous names are refused, never guessed** (`AMBIGUOUS`). `"rec"` is the clash this table exists for:
  in the grounding literature (RefCOCO, VLM-R1) REC is *referring expression comprehension* — a box, so
  `spatial_grounding`; in OVO-Bench (and EasyVideoR1's copy of it, `problem_type: "REC"`) REC is *repetition
  counting* — a count, so `numerical`. Scoring a count as a box (or the reverse) would not fail loudly on every row,
  so `"rec"` raises `AmbiguousProblemTypeError` naming both readings. Spell the meaning
  (`"referring_expression"` / `"repetition_counting"`), or give the caller's own reading for its context:
  `normalize_problem_type("REC", aliases={"rec": "repetition_counting"})` — a benchmark loader knows which REC it has.

>>> from evr1_rewards import normalize_problem_type
>>> normalize_problem_type("Multiple-Choice")
'multiple_choice'
>>> normalize_problem_type("REC", aliases={"REC": "repetition_counting"})
'numerical'
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MULTIPLE_CHOICE = "multiple_choice"
NUMERICAL = "numerical"
REGRESSION = "regression"
BOOLEAN = "boolean"
TEMPORAL_GROUNDING = "temporal_grounding"
SPATIAL_GROUNDING = "spatial_grounding"
SPATIOTEMPORAL_GROUNDING = "spatiotemporal_grounding"
TRACKING = "tracking"
SEGMENTATION = "segmentation"
OCR = "ocr"
MATH = "math"
CODE = "code"
OPEN_ENDED = "open_ended"
PREFERENCE = "preference"

BUILTIN_ALIASES: Mapping[str, tuple[str, ...]] = {
    MULTIPLE_CHOICE: ("multiple choice", "mcq", "mc", "multi_choice", "choice", "single_choice"),
    NUMERICAL: ("number", "numeric", "counting", "count", "numerical_answer", "repetition_counting", "object_counting"),
    REGRESSION: ("mra", "numerical_regression", "estimation"),
    BOOLEAN: ("binary_classification", "yes_no", "yesno", "true_false", "judgement", "bool"),
    TEMPORAL_GROUNDING: ("temporal grounding", "tg", "moment_retrieval", "temporal_localization", "tvg"),
    SPATIAL_GROUNDING: (
        "spatial grounding", "referring_expression", "referring_expression_comprehension", "visual_grounding", "bbox",
    ),
    SPATIOTEMPORAL_GROUNDING: (
        "spatial_temporal_grounding", "spatial-temporal grounding", "st_grounding", "stvg", "stg",
        "spatio_temporal_grounding",
    ),
    TRACKING: ("object_tracking", "video_tracking", "sot", "single_object_tracking"),
    SEGMENTATION: ("segmentation_image", "segmentation_video", "referring_segmentation", "ris", "rvos", "seg"),
    OCR: ("text_recognition", "scene_text", "anls", "text_reading"),
    MATH: ("mathematics", "math_reasoning", "maths"),
    CODE: ("coding", "python", "programming", "code_generation", "python_code"),
    OPEN_ENDED: (
        "open-ended", "free_form", "free-form", "video_qa", "video qa", "video_description", "caption", "captioning",
        "short_answer", "oe", "open",
    ),
    PREFERENCE: ("llava", "critic", "llava_critic", "pairwise", "reward_model", "judge"),
}  # fmt: skip
"""Canonical name -> the aliases it answers to (normalised with `name_key` when registered)."""

BUILTIN_TYPES: tuple[str, ...] = tuple(sorted(BUILTIN_ALIASES))
"""The canonical names of the built-in scorers, sorted."""

AMBIGUOUS: Mapping[str, Mapping[str, str]] = {
    "rec": {
        "referring_expression": "referring expression comprehension (a box; RefCOCO, VLM-R1)",
        "repetition_counting": "repetition counting (a count; OVO-Bench)",
    },
}
"""Names that mean different types in different communities -> {unambiguous alias: what it means}. Refused."""

_SEP = re.compile(r"[\s\-_/]+")


def name_key(name: object) -> str:
    """The spelling-insensitive form of a type name: 'Spatial-Temporal Grounding' -> 'spatial_temporal_grounding'."""
    return _SEP.sub("_", str(name).strip().lower()).strip("_")
