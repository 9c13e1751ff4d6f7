"""ODV-Bench (MCG-NJU; 7,896 MC questions per EasyVideoR1's report): accuracy with task / subtask breakdown,
evr1-rewards letter extraction. EasyVideoR1's annotation file (over 4 MiB) could not be read: schema unverified.
"""

from evr1_eval.api.base import Benchmark
from evr1_eval.api.registry import register

BENCHMARK = register(
    Benchmark(
        name="odvbench",
        title="ODV-Bench",
        problem_types=("multiple_choice",),
        group_fields={"task": ("odv_task",), "subtask": ("odv_subtask",)},
    )
)
