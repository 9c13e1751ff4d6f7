"""MotionBench (arXiv 2501.02955): fine-grained motion MC, 6 categories (MR, LM, CM, MO, AO, RC); accuracy.

Extraction: lmms-eval `motionbench/utils.py` (text after the last `</think>`, upper-cased, first standalone A-F).
EasyVideoR1's file has 4,018 rows (its report says 3,715).
"""

from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.extractors import motionbench_extract
from evr1_eval.benchmarks.scoring_rules import letter_rule

BENCHMARK = register(
    Benchmark(
        name="motionbench",
        title="MotionBench (dev)",
        problem_types=("multiple choice",),
        group_fields={"category": ("question_type", "original_question_type", "category")},
        scorer=letter_rule(lambda s, r: motionbench_extract(r), "motionbench-lmms"),
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
    )
)
