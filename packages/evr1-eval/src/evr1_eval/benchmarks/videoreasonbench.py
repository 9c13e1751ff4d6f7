"""VideoReasonBench (arXiv 2505.23359): 1,440 open-ended questions on 240 videos, 6 skills over recall/infer/predict.
Official accuracy is judged by Qwen2.5-72B: every row needs a judge; without one the benchmark reports no score.
"""

from evr1_eval.api.base import Benchmark
from evr1_eval.api.loading import first_folder
from evr1_eval.api.registry import register

BENCHMARK = register(
    Benchmark(
        name="videoreasonbench",
        title="VideoReasonBench",
        problem_types=("open_ended",),
        group_fields={"skill": ("skill", "question_type"), "demo": ("demo_type",)},
        derived_groups={"demo": first_folder},
        judged_types=frozenset({"open_ended"}),
        notes=("official judge is Qwen2.5-72B; the simulator check for Predict-Operation is not run",),
    )
)
