"""OVO-Bench (arXiv 2501.05510): streaming video QA. Backward (EPM, ASI, HLD) and real-time (STU, OJR, ATR, ACR, OCR,
FPD) tasks are MC; forward tasks are REC (counting), SSR and CRR (yes/no), one row per test point in EasyVideoR1's file.

Official scoring (JoeLeelyf/OVO-Bench `OVOBenchScore.py`): MC by GT-letter substring, REC by concatenated digits,
SSR/CRR by "Y"/"N" or case-sensitive "Yes"/"No" substring; per-task accuracy -> mean per category -> overall = mean
of the 3 category means.
"""

from evr1_eval.benchmarks import aggregation
from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.scoring_rules import ovobench_rule

BENCHMARK = register(
    Benchmark(
        name="ovobench",
        title="OVO-Bench",
        problem_types=("multiple choice", "REC", "SSR", "CRR"),
        group_fields={"task": ("ovo_task", "task"), "category": ("ovo_category", "category")},
        scorer=ovobench_rule,
        # Forward rows hold a bare step / activity / question: say what is asked (evr1 wording, prompt_version v1).
        question_templates={
            "SSR": 'This video shows a procedure. Is the person performing this step right now: "{question}"?',
            "CRR": 'Has the video shown enough so far to answer this question: "{question}"?',
            "REC": "{question} Count the repetitions seen so far.",
        },
        aggregator=aggregation.ovobench,
    )
)
