"""The benchmark registry: a dict filled by `register()` (one call per benchmark module), looked up by name or alias.

Importing `evr1_eval.benchmarks` imports every built-in benchmark module, and Python always runs a package's
`__init__` before any of its modules, so the registry is full before the first lookup without an import back into the
package. A third-party benchmark registers itself the same way (`register(Benchmark(...))` at import time).
"""

from __future__ import annotations

from evr1_cache.registry import lookup
from evr1_eval.api.base import Benchmark

_REGISTRY: dict[str, Benchmark] = {}
_ALIASES: dict[str, str] = {}


def register(bench: Benchmark) -> Benchmark:
    """Add a benchmark (and its aliases) to the registry; a duplicate name is a programming error."""
    for key in (bench.name, *bench.aliases):
        if key in _REGISTRY or key in _ALIASES:
            raise ValueError(f"benchmark name {key!r} is already registered")
    _REGISTRY[bench.name] = bench
    _ALIASES.update(dict.fromkeys(bench.aliases, bench.name))
    return bench


def get_benchmark(name: str) -> Benchmark:
    """Look a benchmark up by name or alias; an unknown name raises with the closest known names."""
    fix = f"`evr1-eval list` shows all {len(_REGISTRY)} benchmarks"
    return lookup(_REGISTRY, name, "benchmark", aliases=_ALIASES, fix=fix, cutoff=0.5)


def available_benchmarks() -> list[str]:
    return sorted(_REGISTRY)
