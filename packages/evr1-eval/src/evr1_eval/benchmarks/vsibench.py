"""VSI-Bench (arXiv 2412.14171): 5,130 questions on 288 indoor scans, 8 tasks (4 numeric, 4 MC).

Official rule (thinking-in-space `vsibench/utils.py`): first answer token; MC by case-insensitive equality, numeric by
MRA over 10 thresholds with `<=`; overall = unweighted mean of 8 task scores with the three rel_direction levels
averaged first. EasyVideoR1 reports MC and MRA micro means separately (kept here as `mca_micro`/`mra_micro`).
"""

from evr1_eval.benchmarks import aggregation
from evr1_eval.benchmarks.adapters import vsibench_official
from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.scoring_rules import vsibench_rule

BENCHMARK = register(
    Benchmark(
        name="vsibench",
        title="VSI-Bench",
        problem_types=("multiple choice", "regression"),
        group_fields={"task": ("question_type", "original_question_type")},
        adapter=vsibench_official,
        scorer=vsibench_rule,
        aggregator=aggregation.vsibench,
    )
)
