"""MINERVA (arXiv 2505.00681): 1,515 MC-5 questions on 223 videos; accuracy (the LLM-judged MiRA reasoning score is
optional and not computed). Extraction: lmms-eval `_extract_choice_letter` (last "answer/option is X", else the LAST
capital option letter, else a random option seeded by the sample id). EasyVideoR1's file is a 1,431-row subset.
"""

from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.extractors import minerva_extract
from evr1_eval.benchmarks.scoring_rules import letter_rule, letters_of

BENCHMARK = register(
    Benchmark(
        name="minerva",
        title="MINERVA",
        problem_types=("multiple choice",),
        group_fields={"type": ("question_type", "reasoning_type")},
        scorer=letter_rule(lambda s, r: minerva_extract(r, s.id, letters_of(s, "ABCDE")), "minerva-lmms"),
        notes=("MiRA reasoning score (LLM-judged) not computed",),
    )
)
