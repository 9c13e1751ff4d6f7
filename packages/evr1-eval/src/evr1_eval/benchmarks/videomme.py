"""Video-MME (w/o subtitles; arXiv 2405.21075): 900 videos, 2,700 MC-4 questions, short/medium/long.

Official rule: MME-Benchmarks/Video-MME `extract_characters_regex` (first A-D anywhere after prefix stripping,
missing-comma prefixes kept) and accuracy over *answered* questions only; `accuracy_strict` counts every question.
"""

from evr1_eval.benchmarks import aggregation
from evr1_eval.benchmarks.adapters import official_mc
from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.extractors import videomme_extract
from evr1_eval.benchmarks.scoring_rules import letter_rule

BENCHMARK = register(
    Benchmark(
        name="videomme",
        title="Video-MME",
        problem_types=("multiple choice",),
        id_fields=("question_id", "qid", "id"),
        group_fields={"duration": ("duration",), "domain": ("domain",), "task_type": ("task_type",)},
        adapter=official_mc,
        scorer=letter_rule(lambda s, r: videomme_extract(r, "ABCD"), "videomme-official"),
        aggregator=aggregation.answered_only,
    )
)
