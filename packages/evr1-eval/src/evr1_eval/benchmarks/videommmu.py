"""Video-MMMU (arXiv 2501.13826): 900 questions (Perception / Comprehension / Adaptation x 300), MC up to 10 options
plus numerical answers. Accuracy per track; MC extraction: lmms-eval `extract_mcq_answer` over the row's letters;
numerical rows: evr1-rewards numerical scorer. Δknowledge (Adaptation) needs a second run without the lecture video:
`evr1-eval run … --without-video`, then `evr1-eval report` over both runs computes it. EasyVideoR1's file has no track
labels: only the Adaptation rows (those with an image) are known. EasyVideoR1's `videommmu_with_image.json` appends the
Adaptation image after the video.
"""

from collections.abc import Mapping
from typing import Any

from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.extractors import lmms_mcq_extract
from evr1_eval.benchmarks.scoring_rules import letter_rule, letters_of


def _adaptation(row: Mapping[str, Any]) -> str | None:
    """EasyVideoR1's file has no track field; its 300 rows with an image are the Adaptation track."""
    return "Adaptation" if row.get("image_path") else None


BENCHMARK = register(
    Benchmark(
        name="videommmu",
        title="Video-MMMU",
        problem_types=("multiple choice", "numerical"),
        group_fields={"track": ("track", "question_type", "category")},
        derived_groups={"track": _adaptation},
        scorer=letter_rule(lambda s, r: lmms_mcq_extract(r, letters_of(s, "ABCDEFGHIJ")), "lmms-extract-mcq"),
        notes=("Δknowledge (Adaptation): add a `run --without-video` baseline and `report` both runs",),
    )
)
