"""MVBench (arXiv 2311.17005): 20 tasks x 200 MC questions; official metric = mean accuracy (equal task sizes make the
item mean and the task mean the same number; both are reported when rows carry a `task`).

Extraction follows lmms-eval's `mcq_acc` ("X. text" or the first standalone a-e, so the article "a" reads as A).
EasyVideoR1's file has no task labels (breakdown by source dataset = the video's first folder instead) and is a
3,586-item subset without the nturgbd/tvqa sources: its number is not comparable to the official one.
"""

from evr1_eval.benchmarks import aggregation
from evr1_eval.benchmarks.adapters import official_mc
from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.extractors import mvbench_extract
from evr1_eval.benchmarks.loading import first_folder
from evr1_eval.benchmarks.scoring_rules import letter_rule

BENCHMARK = register(
    Benchmark(
        name="mvbench",
        title="MVBench",
        problem_types=("multiple choice",),
        group_fields={"task": ("task_type", "task")},
        derived_groups={"source": first_folder},
        adapter=official_mc,
        scorer=letter_rule(lambda s, r: mvbench_extract(r), "mvbench-lmms"),
        aggregator=aggregation.mvbench,
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
        notes=("EasyVideoR1's mvbench.json is a 3,586-item subset of the official 4,000",),
    )
)
