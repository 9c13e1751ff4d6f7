"""Charades-STA test (TALL, ICCV'17): 3,720 query-moment pairs; R@1 at IoU >= {0.3, 0.5, 0.7} and mIoU.

Per-sample tIoU from evr1-rewards' temporal-grounding scorer in metric mode (JSON or prose spans, reversed spans
swapped, unparsable = 0: the lmms-eval protocol). EasyVideoR1's file stores the truth as
`<think>{"time": [s, e]}</think><[PLHD…]>`; the loader unwraps it. The official txt layout is read too.
"""

from evr1_eval.benchmarks import aggregation
from evr1_eval.benchmarks.adapters import charades_official
from evr1_eval.benchmarks.base import Benchmark, register

BENCHMARK = register(
    Benchmark(
        name="charades_sta",
        title="Charades-STA",
        problem_types=("temporal grounding",),
        adapter=charades_official,
        question_templates={"temporal grounding": 'When does this happen in the video: "{question}"?'},
        aggregator=aggregation.temporal_grounding,
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
    )
)
