"""VideoMathQA (arXiv 2506.05349): 420 MC-5 questions, plus multi-binary (MBin) pairs marked by `mbinary_id`.

Official metrics: MCQ accuracy over the single questions, and MBin accuracy where a question counts only if ALL its
binary pairs are right. EasyVideoR1 mixes both in one file and averages items (neither number; reported here as
`item_micro_unofficial`). Extraction: Video-MME-style regex over A-E (lmms-eval `videomathqa/utils.py`).
In EasyVideoR1's file each question's 4 pairs reuse the question's `problem_id` and carry a unique `mbinary_id`:
pair ids become `<problem_id>#<mbinary_id>` and pairs are grouped by `problem_id`.
"""

from evr1_eval.benchmarks import aggregation
from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.extractors import videomme_extract
from evr1_eval.benchmarks.scoring_rules import letter_rule, letters_of

BENCHMARK = register(
    Benchmark(
        name="videomathqa",
        title="VideoMathQA",
        problem_types=("multiple choice",),
        id_suffix_field="mbinary_id",
        group_fields={
            "mbin": ("mbinary_id",),
            "question": ("problem_id", "question_id"),
            "category": ("category",),
            "length": ("length",),
        },
        scorer=letter_rule(lambda s, r: videomme_extract(r, letters_of(s, "ABCDE")), "videomme-regex"),
        aggregator=aggregation.videomathqa,
    )
)
