"""MMVU val (arXiv 2501.12380): 625 MC + 375 open-ended expert-domain questions.

The official protocol judges BOTH formats with GPT-4o. Open-ended rows need a judge (without one they stay pending).
With a judge, MC rows are judged too; without one they are scored with evr1-rewards' letter extraction (the popular
"MMVU (mc)" protocol of Video-R1 and EasyVideoR1) and the summary counts them as rule-scored.
"""

from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.loading import parent_folder

BENCHMARK = register(
    Benchmark(
        name="mmvu",
        title="MMVU (val)",
        problem_types=("multiple choice", "open-ended"),
        group_fields={"subject": ("subject", "discipline"), "format": ("original_question_type",)},
        derived_groups={"subject": parent_folder},
        judged_types=frozenset({"open-ended"}),
        aliases=("mmvu-mc", "mmvu-all"),
        judge_optional_types=frozenset({"multiple choice"}),
    )
)
