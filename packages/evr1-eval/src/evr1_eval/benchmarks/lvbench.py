"""LVBench (arXiv 2406.08035): 1,549 MC-4 questions on 103 hour-long videos; accuracy.

Extraction: lmms-eval's shared `extract_mcq_answer` restricted to A-D. EasyVideoR1's file has 1,492 rows (4 videos
missing).
"""

from evr1_eval.benchmarks.adapters import official_mc
from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.extractors import lmms_mcq_extract
from evr1_eval.benchmarks.scoring_rules import letter_rule

BENCHMARK = register(
    Benchmark(
        name="lvbench",
        title="LVBench",
        problem_types=("multiple choice",),
        id_fields=("uid", "question_id", "id"),
        group_fields={"question_type": ("question_type", "original_question_type")},
        adapter=official_mc,
        scorer=letter_rule(lambda s, r: lmms_mcq_extract(r, "ABCD"), "lmms-extract-mcq"),
    )
)
