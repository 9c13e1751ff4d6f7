"""Video-Holmes (arXiv 2505.21374): 1,837 MC-6 questions on 270 films, 7 question types; accuracy overall and per type.

Extraction: MMMU-style `parse_multi_choice_response` as in lmms-eval (`(X)` -> ` X ` -> `X.` -> option text ->
random option, here seeded by the sample id).
"""

from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.extractors import mmmu_extract
from evr1_eval.benchmarks.loading import parse_options
from evr1_eval.benchmarks.scoring_rules import letter_rule
from evr1_eval.types import Sample


def _extract(sample: Sample, response: str) -> str:
    return mmmu_extract(response, parse_options(list(sample.options)), sample.id)


BENCHMARK = register(
    Benchmark(
        name="video_holmes",
        title="Video-Holmes",
        problem_types=("multiple choice",),
        group_fields={"type": ("question_type", "type", "task")},
        scorer=letter_rule(_extract, "mmmu-parse"),
        aliases=("holmes",),
    )
)
