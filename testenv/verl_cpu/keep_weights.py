"""Test env only: a vLLM general plugin that keeps plain `nn.Parameter` linear weights on vLLM-CPU.

vLLM-CPU repacks each linear weight into a oneDNN handle and leaves an empty Parameter without `weight_loader`, so
verl's in-place weight sync into the rollout server fails. Routing every CPU linear through `F.linear` on the plain
weight keeps them loadable. Registered through the fake `vllm` dist-info's entry point (see setup_venv.sh).
"""

from __future__ import annotations

from typing import Any


def register() -> None:
    import importlib

    import torch

    def keep_plain(layer: Any, remove_weight: bool) -> None:
        layer.cpu_linear = torch.nn.functional.linear

    for name in (
        "vllm.model_executor.layers.utils",
        "vllm.model_executor.layers.linear",
        "vllm.model_executor.layers.vocab_parallel_embedding",
    ):
        module = importlib.import_module(name)
        if hasattr(module, "dispatch_cpu_unquantized_gemm"):
            module.dispatch_cpu_unquantized_gemm = keep_plain
