"""LongVideoBench val (arXiv 2407.15754): 1,337 MC questions with 4-5 options; accuracy by duration group and category.

Extraction: the official `parse_multi_choice_response` (prefixes stripped, FIRST option letter anywhere, so
"Answer: D" reads as A; no letter -> random option, here seeded by the sample id).
"""

from evr1_eval.benchmarks.adapters import official_mc
from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.extractors import longvideobench_extract
from evr1_eval.benchmarks.scoring_rules import letter_rule, letters_of

BENCHMARK = register(
    Benchmark(
        name="longvideobench",
        title="LongVideoBench (val)",
        problem_types=("multiple choice",),
        group_fields={
            "duration_group": ("duration_group",),
            "category": ("question_category", "original_question_type"),
        },
        adapter=official_mc,
        scorer=letter_rule(
            lambda s, r: longvideobench_extract(r, letters_of(s, "ABCDE"), s.id), "longvideobench-official"
        ),
    )
)
