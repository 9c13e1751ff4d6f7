"""Rows -> prompts, pixels and reward inputs; `Evr1Dataset` for verl's `data.custom_cls`.

Public API (stable; the verl-free core is shared with the local engine):
    DataOptions, RowInputs, row_to_inputs, row_messages, load_media, row_extra_info, ground_truth_of,
    build_prompt_text, check_model_family, loader_for (evr1-cache's `MediaLoader` set up by `DataOptions`)
`Evr1Dataset` (needs verl) is imported lazily: `from evr1_train.data.dataset import Evr1Dataset`.
"""

from evr1_cache.lazy import lazy_exports
from evr1_train.data.options import DataOptions
from evr1_train.data.prompt import build_prompt_text
from evr1_train.data.row import (
    RowInputs,
    check_model_family,
    ground_truth_of,
    load_media,
    loader_for,
    row_extra_info,
    row_messages,
    row_to_inputs,
)

__all__ = [
    "DataOptions",
    "Evr1Dataset",
    "RowInputs",
    "build_prompt_text",
    "check_model_family",
    "ground_truth_of",
    "load_media",
    "loader_for",
    "row_extra_info",
    "row_messages",
    "row_to_inputs",
]
__getattr__, __dir__ = lazy_exports(__name__, {"Evr1Dataset": "evr1_train.data.dataset"})
