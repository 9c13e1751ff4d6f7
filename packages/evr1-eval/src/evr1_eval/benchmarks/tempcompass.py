"""TempCompass (arXiv 2403.00476): 410 videos, temporal dimensions (action, speed, direction, order, attribute
change) over MC / yes-no / caption-matching / captioning formats; accuracy per format x dimension.

EasyVideoR1 ships the MC part only. Official scoring tries hand rules then a ChatGPT judge; here MC rows use
evr1-rewards' letter extraction (no judge fallback) and the summary says so.
"""

from evr1_eval.benchmarks.base import Benchmark, register

BENCHMARK = register(
    Benchmark(
        name="tempcompass",
        title="TempCompass (MC)",
        problem_types=("multiple choice",),
        group_fields={"dimension": ("dim", "dimension", "temporal_dimension", "task_type")},
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
        notes=("official ChatGPT fallback for unmatched answers not applied (rule-based letter extraction only)",),
    )
)
