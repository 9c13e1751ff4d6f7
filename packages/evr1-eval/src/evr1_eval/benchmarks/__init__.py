"""The benchmark registry: importing this package registers every benchmark module.

The framework lives in `evr1_eval.api` (`registry` holds the dict and the lookups; `base` the `Benchmark` contract);
one module per benchmark here declares its loader, its official protocol (reference, prompt, per-sample rule,
aggregation) and registers itself.
"""

from evr1_eval.api.base import DEFAULT_SAMPLING, Benchmark
from evr1_eval.api.registry import available_benchmarks, get_benchmark, register
from evr1_eval.benchmarks import (  # noqa: F401  (each import registers one benchmark)
    charades_sta,
    evr1_data,
    livesports3k,
    longvideo_reason,
    longvideobench,
    lvbench,
    minerva,
    mlvu,
    mmvu,
    motionbench,
    mvbench,
    odvbench,
    ovobench,
    stvg,
    tempcompass,
    vcrbench,
    video_holmes,
    videomathqa,
    videomme,
    videommlu,
    videommmu,
    videoreasonbench,
    vsibench,
)
from evr1_eval.types import Judge, LoadError, LoadResult, Outcome

__all__ = [
    "DEFAULT_SAMPLING",
    "Benchmark",
    "Judge",
    "LoadError",
    "LoadResult",
    "Outcome",
    "available_benchmarks",
    "get_benchmark",
    "register",
]
