"""MLVU (arXiv 2406.04264), multiple-choice part (dev: 7 task types; test: 9, 6 options).

Official metric: M-Avg = mean of per-task accuracies (not the item mean EasyVideoR1 reports); the task comes from
`question_type`/`task_type`/`task`. EasyVideoR1's mlvu*.json files carry no task label (video names are sources such
as "movie101", not tasks), so on them M-Avg cannot be computed: the summary falls back to the item mean and says so.
Extraction:
lmms-eval's `extract_mcq_answer`, but over the row's own letters: current lmms-eval restricts it to A-D, which makes
E/F unreachable on the 6-option test split.
"""

from evr1_eval.benchmarks import aggregation
from evr1_eval.benchmarks.adapters import official_mc
from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.extractors import lmms_mcq_extract
from evr1_eval.benchmarks.scoring_rules import letter_rule, letters_of

BENCHMARK = register(
    Benchmark(
        name="mlvu",
        title="MLVU (MC)",
        problem_types=("multiple choice",),
        group_fields={"task": ("question_type", "task_type", "task")},
        adapter=official_mc,
        scorer=letter_rule(lambda s, r: lmms_mcq_extract(r, letters_of(s)), "lmms-extract-mcq"),
        aggregator=aggregation.macro("task", "m_avg", fallback="micro_accuracy"),
        aliases=("mlvu-test", "mlvu-dev"),
    )
)
