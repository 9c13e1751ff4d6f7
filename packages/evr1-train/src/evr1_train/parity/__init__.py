"""Input parity between the verl dataset, the transformers processor and vLLM (`evr1-train parity`).

Public API (stable):
    SideRecord, write_dump(path, records), read_dump(path)              # records.py: safetensors + JSON, no pickle
    load_parity_data(data_file, cache_dir, n) -> ParityData            # sides.py
    collect_verl(model, data), collect_hf(model, data), await collect_vllm(engine, data)
    compare_sides({side: records}) -> [SampleComparison], table(results), max_logprob_diff(results)
    PIXEL_TOLERANCE, LOGPROB_TOLERANCE_FP32, LOGPROB_TOLERANCE_BF16
Importing this package is light: torch, transformers, verl and vLLM are imported by the side that needs them.
"""

from evr1_train.parity.compare import (
    LOGPROB_TOLERANCE_BF16,
    LOGPROB_TOLERANCE_FP32,
    PIXEL_TOLERANCE,
    SampleComparison,
    compare_sides,
    max_logprob_diff,
    table,
)
from evr1_train.parity.records import SIDES, SideRecord, read_dump, write_dump
from evr1_train.parity.sides import ParityData, collect_hf, collect_verl, collect_vllm, load_parity_data

__all__ = [
    "LOGPROB_TOLERANCE_BF16",
    "LOGPROB_TOLERANCE_FP32",
    "PIXEL_TOLERANCE",
    "SIDES",
    "ParityData",
    "SampleComparison",
    "SideRecord",
    "collect_hf",
    "collect_verl",
    "collect_vllm",
    "compare_sides",
    "load_parity_data",
    "max_logprob_diff",
    "read_dump",
    "table",
    "write_dump",
]
