"""VCR-Bench (arXiv 2504.07956): 1,034 questions (510 MC + 524 open-ended) on 859 videos.

Official accuracy is LLM-judged (GPT-4o) on the final answer, plus a judged CoT score (not computed). Open-ended rows
need a judge; MC rows are judged when a judge is given, else scored by evr1-rewards' letter extraction (the summary
counts them as rule-scored).
"""

from evr1_eval.api.base import Benchmark
from evr1_eval.api.registry import register

BENCHMARK = register(
    Benchmark(
        name="vcrbench",
        title="VCR-Bench",
        problem_types=("multiple_choice", "open_ended"),
        group_fields={"dimension": ("dimension", "question_type", "original_question_type")},
        judged_types=frozenset({"open_ended"}),
        judge_optional_types=frozenset({"multiple_choice"}),
        notes=("CoT score not computed",),
    )
)
