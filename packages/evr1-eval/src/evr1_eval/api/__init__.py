"""The benchmark framework: the contract, registry, loader, scoring rules and aggregation that benchmark modules use.

`evr1_eval.benchmarks` holds one module per benchmark (a declaration built from these pieces); this package holds the
pieces themselves, so a reader finds the framework apart from the benchmarks (as lmms-eval keeps `lmms_eval/api/`
apart from its task folders). Importing `evr1_eval.benchmarks` fills the registry.
"""
