"""evr1-eval: asynchronous multi-benchmark video VLM evaluation with official scoring protocols.

Public API: the record types, the benchmark registry, scoring of existing predictions, the runner and the backend
factory. Importing it stays light: every backend imports its engine (vLLM, transformers, httpx) only when started.
"""

from evr1_eval.backends import BackendConfig, GenerationParams, backend_names, create_backend
from evr1_eval.benchmarks import (
    Benchmark,
    Judge,
    LoadError,
    LoadResult,
    available_benchmarks,
    get_benchmark,
    register,
)
from evr1_eval.manifest import package_version
from evr1_eval.protocol import Evr1Settings, ProtocolSettings
from evr1_eval.runner import Job, JobResult, RunConfig, evaluate, run_async
from evr1_eval.scoring import Prediction, read_predictions, score_samples
from evr1_eval.types import BenchmarkSummary, Generation, Reading, Reference, Sample, ScoredSample

__version__ = package_version("evr1-eval")

__all__ = [
    "BackendConfig",
    "Benchmark",
    "BenchmarkSummary",
    "Evr1Settings",
    "Generation",
    "GenerationParams",
    "Job",
    "JobResult",
    "Judge",
    "LoadError",
    "LoadResult",
    "Prediction",
    "ProtocolSettings",
    "Reading",
    "Reference",
    "RunConfig",
    "Sample",
    "ScoredSample",
    "__version__",
    "available_benchmarks",
    "backend_names",
    "create_backend",
    "evaluate",
    "get_benchmark",
    "read_predictions",
    "register",
    "run_async",
    "score_samples",
]
