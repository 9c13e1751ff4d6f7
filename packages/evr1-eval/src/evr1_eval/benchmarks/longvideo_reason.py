"""LongVideo-Reason (LongVILA-R1, arXiv 2507.07966) eval split: MC with 4-8 options; accuracy with evr1-rewards'
letter extraction (the paper's rule is a letter match). EasyVideoR1's file has 851 rows (split size unverified).
"""

from evr1_eval.api.base import Benchmark
from evr1_eval.api.registry import register

BENCHMARK = register(
    Benchmark(
        name="longvideo_reason",
        title="LongVideo-Reason",
        problem_types=("multiple_choice",),
        group_fields={"category": ("question_type", "category", "original_question_type")},
        aliases=("longvideoreason",),
    )
)
